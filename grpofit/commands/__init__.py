"""One orchestrator per command: read runs, fit, judge or forecast them, collect the document."""
