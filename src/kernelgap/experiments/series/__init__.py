"""The series: certified, constructed and trained rank on witness families of growing size."""
