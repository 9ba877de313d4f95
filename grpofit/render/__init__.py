"""Documents rendered for people: tables, markdown, JUnit XML and figures."""
