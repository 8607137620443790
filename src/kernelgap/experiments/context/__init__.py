"""The wall in context length: the layer family's certified rank against N and m, and a trained point."""
