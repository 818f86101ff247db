"""What holds on every engine, written once over small transaction interfaces."""
