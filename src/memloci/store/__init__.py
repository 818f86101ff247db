"""Storage engines behind narrow protocols (protocols.py): one package per engine,
sqlite/, markdown/ and postgres/, each behind one facade class."""
