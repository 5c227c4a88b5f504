"""`collector connect`: the authorisation flows each service offers, run from the command line, giving the
credentials of the network they authorised as a value; account.py has collector.ops.accounts write it. apps.py
declares what each service asks for; oauth2.py (the device grant, the authorisation code with PKCE), oauth1.py
(OAuth 1.0a), instances.py (Mastodon's per-instance application, Bluesky's app password) and loopback.py (the
127.0.0.1 redirect's one-shot listener) run the steps; wire.py speaks to the servers on the collectors' HTTP
client; flows.py puts a flow together; errors.py says how one fails. Nothing is imported here: the command line's
parser reads apps.py alone."""
