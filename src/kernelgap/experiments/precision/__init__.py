"""Finite precision: trained models read through b-bit sketches."""
