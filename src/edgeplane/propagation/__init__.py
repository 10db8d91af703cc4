"""Configuration propagation: how a change committed by the control plane reaches every process that follows
configuration (edge workers, delivery) at once, and how the control plane learns that the edge workers applied it.

- ``channel``: the local socket between the API and the followers, and the messages on it;
- ``hub``: the API's side: announces each new version and waits, bounded, until every edge worker applied it;
- ``follower``: a follower's side: applies announced versions, acknowledges them, and checks the version now and then
  in case an announcement was missed;
- ``database_notify``: PostgreSQL's LISTEN/NOTIFY, the same announcement for followers on other machines.
"""
