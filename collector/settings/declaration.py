"""Every setting, declared once: its environment name, the Settings field it fills, its kind (parser and bounds,
parsers.py), its default (as config/defaults.env holds it), whether it is secret, what a reload does with it, and one
line of help. Parsing (loading.py), `--check-config` (Settings.describe), the reload's fixed settings
(collector/lifecycle.py, checked by a test), config/defaults.env and docs/reference/settings.md derive from here;
`python -m collector.settings.reference --write` writes the two files again after an edit here."""

from __future__ import annotations

from . import parsers as kinds
from .parsers import DEFAULT_ENV
from .setting import KEPT, Family, Setting
from .setting import RELOADS as RELOADS
from .setting import YES as YES

ENVIRONMENT = Setting(
    "COLLECTOR_ENV",
    "env",
    kinds.ENVIRONMENT,
    DEFAULT_ENV,
    "Which config/<COLLECTOR_ENV>.env is read over config/defaults.env; from the environment or the settings file.",
    reload=KEPT,
)

CREDENTIAL_HELP = "An app credential of a service, for its networks and `collector connect` (empty: not configured)."
REDIRECT_HELP = "The redirect registered for `collector connect`, when exact (empty: http://127.0.0.1, any port)."
KEYS = "STACKEXCHANGE_KEY TUMBLR_CONSUMER_KEY TUMBLR_CONSUMER_SECRET FLICKR_API_KEY FLICKR_API_SECRET GITHUB_CLIENT_ID"
OAUTH_APPS = "REDDIT TWITTER YOUTUBE SPOTIFY STACKEXCHANGE VIMEO DRIBBBLE FACEBOOK"  # <S>_CLIENT_ID, <S>_CLIENT_SECRET
CREDENTIALS = (*KEYS.split(), *(f"{s}_CLIENT_{w}" for s in OAUTH_APPS.split() for w in ("ID", "SECRET")))
REDIRECTS = tuple(f"{s}_REDIRECT_URI" for s in OAUTH_APPS.split() if s != "YOUTUBE")  # collector connect's


def _credential(name: str, uri: bool = False) -> Setting:  # a client id and a redirect are not secrets
    return Setting(name, "", kinds.ANY_TEXT, "", (CREDENTIAL_HELP, REDIRECT_HELP)[uri], not uri and "_ID" not in name)


# In the order --check-config prints them and load_settings checks them (the first bad one is named).
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "MONGODB_URI",
        "mongodb_uri",
        kinds.MONGODB_URI,
        "mongodb://localhost:27017/likeastore",
        "MongoDB connection; the database is the one named in the URI path (likeastore if none).",
        secret=True,
        reload=KEPT,
        details="Output and logs show it with its password and every secret-looking option masked.",
    ),
    Setting(
        "LOOP_IDLE_PAUSE",
        "loop_idle_pause",
        kinds.SECONDS,
        "30",
        "When nothing is due, the daemon looks again after this long (a stop wakes it at once).",
        details="The daemon dispatches continuously: it claims networks as its slots free up.",
    ),
    Setting(
        "PASS_LIMIT",
        "pass_limit",
        kinds.COUNT,
        "500",
        "Most networks one pass of `--once` (or run_once) takes, the most overdue first.",
    ),
    Setting(
        "NORMAL_INTERVAL",
        "normal_interval",
        kinds.SECONDS,
        "900",
        "Next run of a network in normal mode (15 minutes).",
    ),
    Setting(
        "RATE_LIMIT_INTERVAL",
        "rate_limit_interval",
        kinds.SECONDS,
        "900",
        "Next run of a rate-limited network when the API gave no reset time.",
    ),
    Setting(
        "INITIAL_INTERVAL",
        "initial_interval",
        kinds.SECONDS,
        "5",
        "Next run of a network in initial mode (one page per run); per service: INITIAL_INTERVAL_<SERVICE>.",
    ),
    Setting(
        "BACKOFF_BASE",
        "backoff_base",
        kinds.SECONDS,
        "60",
        "Transient failures (5xx, timeouts, connection errors) wait BACKOFF_BASE * 2^(errors-1), with jitter.",
    ),
    Setting(
        "BACKOFF_MAX",
        "backoff_max",
        kinds.SECONDS,
        "21600",
        "The longest wait after transient failures (6 hours).",
    ),
    Setting(
        "MAX_ERRORS",
        "max_errors",
        kinds.COUNT,
        "5",
        "Consecutive failures after which a network is disabled.",
    ),
    Setting(
        "HTTP_TIMEOUT",
        "http_timeout",
        kinds.POSITIVE_SECONDS,
        "30",
        "Bounds a whole request (connect, headers and body), not each socket read.",
    ),
    Setting(
        "HTTP_MAX_BYTES",
        "http_max_bytes",
        kinds.COUNT,
        "4194304",
        "Largest response body accepted, after gzip/deflate decoding (4 MiB); a larger one is refused.",
        details="4 MiB is ~7x the largest real page. Memory: 2 x CONCURRENCY x (this + a parsed page) stays inside "
        "the unit's MemoryMax up to a CONCURRENCY of ~20.",
    ),
    Setting(
        "RATE_LIMIT_MIN_WAIT",
        "rate_limit_min_wait",
        kinds.SECONDS,
        "60",
        'A rate-limit reset already past waits this long (plus up to 50% jitter) instead of "now".',
    ),
    Setting(
        "RATE_LIMIT_MAX_WAIT",
        "rate_limit_max_wait",
        kinds.POSITIVE_SECONDS,
        "86400",
        "No rate-limit reset or Retry-After waits longer than this (24 hours), whatever the server names.",
    ),
    Setting(
        "CONCURRENCY",
        "concurrency",
        kinds.CONCURRENCY,
        "16",
        "Requests one collector has out at once (--concurrency overrides); 1 runs networks strictly in series.",
        details="A collector holds up to twice as many networks: one mapping and saving its answer while the next "
        "one's request is out. A reload applies a new value with a new worker pool (runs in flight finish in the "
        "old one), unless --concurrency was given.",
    ),
    Setting(
        "SERVICE_CONCURRENCY",
        "service_concurrency",
        kinds.CONCURRENCY,
        "16",
        "Requests one collector has out at once to one service; per service: SERVICE_CONCURRENCY_<SERVICE>.",
    ),
    Setting(
        "LEASE_SECONDS",
        "lease_seconds",
        kinds.POSITIVE_SECONDS,
        "300",
        "A collector leases the networks it runs for this long, renewing while they run.",
        details="A crashed collector's networks are taken over by another once their lease expires.",
    ),
    Setting(
        "USER_AGENT",
        "user_agent",
        kinds.TEXT,
        "likeastore-collector/0.1 (+https://github.com/likeastore)",
        "The User-Agent header of every request.",
    ),
    Setting(
        "GITHUB_API_URL",
        "github_api_url",
        kinds.HTTP_URL,
        "https://api.github.com",
        "GitHub's API base URL (GitHub Enterprise Server: https://HOST/api/v3).",
        details="Its host is trusted even on a private address (see ALLOW_PRIVATE_HOSTS).",
    ),
    *(_credential(name) for name in CREDENTIALS),
    *(_credential(name, uri=True) for name in REDIRECTS),
    Setting(
        "ALLOW_PRIVATE_HOSTS",
        "allow_private_hosts",
        kinds.BOOLEAN,
        "false",
        "Let user-supplied API hosts (a Mastodon instance, a Bluesky PDS) be loopback, private or link-local.",
        details="Such hosts must be https either way.",
    ),
    Setting(
        "CA_BUNDLE",
        "ca_bundle",
        kinds.CA_PATH,
        "",
        "Certificate authorities to trust for TLS (a PEM file or a hashed directory) instead of the default ones.",
        reload=KEPT,
        details="Empty: the first of REQUESTS_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR set. Every TLS client of the "
        "process trusts these only (to reach public services too, join a public bundle to a private one); a path "
        "that cannot be read or holds no certificate is a settings error; `--check-config` shows what named it.",
    ),
    Setting(
        "LOG_LEVEL",
        "log_level",
        kinds.LOG_LEVEL,
        "INFO",
        "The least severe log records written.",
    ),
    Setting(
        "LOG_FORMAT",
        "log_format",
        kinds.LOG_FORMAT,
        "text",
        "text (for a terminal) or json (one object per line, for journald, Loki, Elasticsearch).",
    ),
    Setting(
        "HEARTBEAT_SECONDS",
        "heartbeat_seconds",
        kinds.POSITIVE_SECONDS,
        "15",
        "Each running collector upserts its heartbeat (collectors collection) this often.",
        details="One silent for three times as long counts as dead in `collector status`.",
    ),
    Setting(
        "STATS_SECONDS",
        "stats_seconds",
        kinds.POSITIVE_SECONDS,
        "1",
        "Each running collector writes its live stats (collectors collection) this often, for the monitor page.",
        details="`collector monitor` reads them every second, so its numbers are at most about two seconds old; one "
        "small upsert per collector each time.",
    ),
    Setting(
        "METRICS_PORT",
        "metrics_port",
        kinds.PORT,
        "",
        "Serve Prometheus /metrics and /healthz on this port (empty or 0: off).",
        reload=KEPT,
    ),
    Setting(
        "METRICS_ADDR",
        "metrics_addr",
        kinds.ADDRESS,
        "127.0.0.1",
        "The address /metrics listens on; a scraper on another host needs 0.0.0.0 and a firewall.",
        reload=KEPT,
    ),
    Setting(
        "MONITOR_HOST",
        "monitor_host",
        kinds.HOST,
        "127.0.0.1",
        "The address `collector monitor` listens on (127.0.0.1: this machine only).",
        details="To open the page to others, put a proxy with TLS in front of it (docs/monitor.md).",
        reload=KEPT,
    ),
    Setting(
        "MONITOR_PORT",
        "monitor_port",
        kinds.LISTEN_PORT,
        "8089",
        "The port `collector monitor` listens on.",
        reload=KEPT,
    ),
    Setting(
        "MONITOR_TOKEN",
        "monitor_token",
        kinds.ANY_TEXT,
        "",
        "Actions from the monitor page need it in the X-Monitor-Token header (empty: the page is read-only).",
        secret=True,
        reload=KEPT,
        details="Output and logs show it masked.",
    ),
    Setting(
        "TOKEN_KEY",
        "token_key",
        kinds.TOKEN_KEY,
        "",
        "Seals the tokens the collector writes (32 random bytes in base64; empty: tokens are stored as given).",
        secret=True,
        reload=KEPT,
        details="Never stored in the database. `openssl rand -base64 32` makes one; tokens found plain are still read, "
        "and sealed at their network's next save (Data model, Tokens at rest).",
    ),
    Setting(
        "TOKEN_KEY_FILE",
        "token_key_file",
        kinds.KEY_FILE,
        "",
        "A file holding TOKEN_KEY instead (its first line; each further line an old key still accepted).",
        reload=KEPT,
        details="A regular file of at most 1 MiB (a systemd credential, a mounted secret); blank lines and lines "
        "starting with # are skipped. Setting both TOKEN_KEY and this is refused.",
    ),
    Setting(
        "TOKEN_KEYS_OLD",
        "token_keys_old",
        kinds.TOKEN_KEYS,
        "",
        "Old keys that still open sealed tokens (comma-separated) while `collector networks reseal` moves them on.",
        secret=True,
        reload=KEPT,
    ),
    Setting(
        "INACTIVE_DAYS",
        "inactive_days",
        kinds.DAYS,
        "60",
        "The initial collector skips networks of users not logged in for this many days (0: off).",
        details="users.loginLastDate tells; a user who is back has the networks revived.",
    ),
    Setting(
        "INACTIVE_SWEEP_CRON",
        "inactive_sweep_cron",
        kinds.CRONTAB,
        "0 4 * * *",
        "When the inactivity sweep runs (crontab, UTC): once a day, in one collector only.",
    ),
    Setting(
        "SERVICES",
        "services",
        kinds.NAMES,
        "",
        "Claim only these services' networks (comma-separated; empty: every service); --services overrides.",
        details="A busy service can get collectors of its own.",
    ),
    Setting(
        "SERVICES_EXCLUDE",
        "services_exclude",
        kinds.NAMES,
        "",
        "Never claim these services' networks (comma-separated).",
    ),
    Setting(
        "SINKS",
        "sinks",
        kinds.SINK_NAMES,
        "",
        "The sinks the sink service hands new items to (comma-separated names; empty: none).",
        details="Each sink is set by its own SINK_<NAME>_<FIELD> settings (Per sink, below). Every collector marks "
        "the items it stores for the sinks whether any is set or not, so the first sink set gets them all.",
    ),
    Setting(
        "SINK_MAX_TRIES",
        "sink_max_tries",
        kinds.COUNT,
        "3",
        "A document a sink rejects this many times is dead-lettered with its reason (sinkDeadLetters).",
    ),
    Setting(
        "SINK_RETRY_MAX",
        "sink_retry_max",
        kinds.POSITIVE_SECONDS,
        "600",
        "The longest wait before a sink's delivery is tried again (back-off from 1 s, doubling, full jitter).",
        details="A Retry-After from the destination is respected up to this long too. A refused delivery is tried "
        "again for as long as it takes: nothing is dropped for being late.",
    ),
    Setting(
        "SINK_LAG_WARN",
        "sink_lag_warn",
        kinds.POSITIVE_SECONDS,
        "900",
        "`collector status --check` warns about a sink whose oldest waiting item is older than this.",
    ),
)

FAMILIES: tuple[Family, ...] = (
    Family(
        "INITIAL_INTERVAL_",
        "initial_intervals",
        kinds.SECONDS,
        "INITIAL_INTERVAL",
        "INITIAL_INTERVAL for one service's networks.",
        extras=(("github", "1", "GitHub allows 5,000 requests/hour: 1 s keeps well inside."),),
    ),
    Family(
        "SERVICE_CONCURRENCY_",
        "service_concurrencies",
        kinds.CONCURRENCY,
        "SERVICE_CONCURRENCY",
        "SERVICE_CONCURRENCY for one service.",
    ),
)

FIELDS = tuple(s for s in SETTINGS if s.field)  # the settings parsed into a Settings field
BY_NAME = {s.name: s for s in (ENVIRONMENT, *SETTINGS)}
FIXED_FIELDS = tuple(s.field for s in (ENVIRONMENT, *SETTINGS) if s.reload == KEPT)  # lifecycle.py's FIXED
