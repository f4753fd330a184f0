"""The semantic model of a linted project: names, APIs, wrappers, scopes, call graph, execution paths."""
