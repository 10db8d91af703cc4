"""The configuration as the processes read it: the snapshot the data plane works from (``snapshot``), with each
zone's firewall compiled, and a zone's previous-WAF configuration (``previous_waf``). It reads the database
(``edgeplane.store``) and compiles with the WAF engine (``edgeplane.waf``), a layer above both, so that the store stays
persistence and the WAF an engine that reads no database."""
