"""The report: Markdown and HTML (build), plots, flame graphs, and the document writer."""
