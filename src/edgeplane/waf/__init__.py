"""The managed WAF: managed ruleset content, the ruleset engine that runs phases on a request, and the previous
(package-based) managed rules."""
