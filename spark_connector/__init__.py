"""PySpark data source for odradek."""
