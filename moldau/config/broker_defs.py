"""The broker config table: every broker config Moldau knows, with its type, default, documentation,
validator, whether it may change at runtime, and whether it is acted on yet.

Pure data: parsing and validation live in ``moldau.config.schema``, addresses in ``moldau.config.addresses``.
One entry here is all a new broker config needs to be accepted, validated, reported by DescribeConfigs and
documented in docs/configuration.md (regenerate it with ``python -m moldau.config_doc``).
"""

from __future__ import annotations

from collections.abc import Mapping

from moldau.config.addresses import BOOTSTRAP_SERVERS, HTTP_LISTENER, LISTENERS, PROTOCOL_MAP, VOTERS
from moldau.config.kafka_broker_configs import KAFKA_BROKER_CONFIGS, READ_ONLY, KafkaBrokerConfig
from moldau.config.offset_reset import AUTO_OFFSET_RESET
from moldau.config.schema import (
    CLEANUP_POLICIES,
    CODEC_IDS,
    COMPRESSION_TYPES,
    GZIP_LEVELS,
    LONG_MAX,
    NON_EMPTY,
    PATHS,
    ROLES,
    TIMESTAMP_TYPES,
    ConfigDef,
    ConfigType,
    ConfigValue,
    Custom,
    ListOf,
    OneOf,
    Range,
    Validator,
    at_least,
)
from moldau.replication.replica_selector import SELECTORS

_T = ConfigType


def _socket_buffer(value: object) -> str | None:
    # Kafka passes any other value to the socket, where 0 or less fails when the listener opens.
    return None if not isinstance(value, int) or value == -1 or value >= 1 else "Value must be -1 or at least 1"


SOCKET_BUFFER = Custom(_socket_buffer, "[-1, 1,...]")


def _migration_policy(value: object) -> str | None:
    # Kafka compares these names without regard to case.
    allowed = ("bidirectional", "upgrade", "downgrade", "disabled")
    return None if str(value).lower() in allowed else f"String must be one of (case insensitive): {', '.join(allowed)}"


_MIGRATION_POLICIES = Custom(_migration_policy, "(case insensitive) [DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL]")
_LONG_MAX = str(LONG_MAX)
_UNUSED = " Accepted for compatibility with Kafka configuration files; not used."


def _log(name: str, type_: ConfigType, default: str | None, topic: str | None, doc: str,
         validator: Validator | None = None, dynamic: bool = True, acted_on: bool = True) -> ConfigDef:
    """A broker default for a topic config; dynamically alterable unless said otherwise."""
    return ConfigDef(name, type_, default, doc, validator, dynamic, topic, acted_on)


def _bounds(prefix: str, name: str, low: int, high: int, what: str) -> tuple[ConfigDef, ConfigDef]:
    """`prefix.min.name` and `prefix.max.name`: the least and greatest value a group's own config may give the
    {what}."""
    return (ConfigDef(f"{prefix}.min.{name}", _T.INT, str(low),
                      f"The least {what} a group config may set.", at_least(1)),
            ConfigDef(f"{prefix}.max.{name}", _T.INT, str(high),
                      f"The greatest {what} a group config may set.", at_least(1)))


# acted_on=False marks a config that is accepted (so Kafka configuration files carry over unchanged) but has
# no effect yet, because the feature behind it is not built (preallocation,
# down-conversion) or does not apply (thread pools: one event loop serves everything). The broker
# warns when one is set; docs/configuration.md marks them "not yet". Clear the flag when the feature lands.
def _check_rebalance_protocols(value: ConfigValue) -> str | None:
    reason = ListOf(("classic", "consumer", "share", "streams")).check(value)
    if reason is None and isinstance(value, tuple) and "classic" not in value:
        return "Disabling the 'classic' rebalance protocol is not supported"
    return reason


_REBALANCE_PROTOCOLS = Custom(_check_rebalance_protocols, "[classic, consumer, share, streams], classic included")

_BROKER_DEFS: tuple[ConfigDef, ...] = (
    # Identity and roles.
    ConfigDef("node.id", _T.INT, "1", "The id of this node in the cluster.", at_least(0)),
    ConfigDef("process.roles", _T.LIST, "broker,controller",
              "The roles this node plays: broker, controller or both.", ROLES),
    ConfigDef("cluster.id", _T.STRING, None,
              "The cluster id to format new log directories with; generated when unset."),
    ConfigDef("broker.rack", _T.STRING, None, "The rack of this broker, reported to rack-aware clients."),
    # Network.
    ConfigDef("listeners", _T.LIST, "PLAINTEXT://127.0.0.1:9092",
              "Addresses to listen on, as NAME://host:port; an empty host means all interfaces.", LISTENERS),
    ConfigDef("advertised.listeners", _T.LIST, None,
              "Addresses given to clients, as NAME://host:port; defaults to listeners.", LISTENERS),
    ConfigDef("listener.security.protocol.map", _T.LIST,
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "The security protocol of each listener name, as NAME:PROTOCOL.", PROTOCOL_MAP),
    ConfigDef("inter.broker.listener.name", _T.STRING, None,
              "The listener followers use to fetch from leaders; defaults to the listener named after "
              "security.inter.broker.protocol when that is set, else to the first non-controller listener."),
    ConfigDef("security.inter.broker.protocol", _T.STRING, "PLAINTEXT",
              "The security protocol brokers use with each other, an older way to choose the inter-broker "
              "listener: the listener of that name (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL). Only one of it "
              "and inter.broker.listener.name may be set.",
              OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))),
    ConfigDef("controller.listener.names", _T.LIST, "",
              "Listener names used by the controller; they default to PLAINTEXT when not mapped."),
    ConfigDef("controller.quorum.voters", _T.LIST, "",
              "The controller quorum, as id@host:port entries; empty for a single combined node.", VOTERS),
    ConfigDef("controller.quorum.bootstrap.servers", _T.LIST, "",
              "Controllers to ask for the quorum (host:port entries) when controller.quorum.voters is empty: "
              "how a node joins a dynamic quorum (KIP-853), as an observer until AddRaftVoter makes it a voter.",
              BOOTSTRAP_SERVERS),
    # The metadata quorum and broker liveness.
    ConfigDef("controller.quorum.election.timeout.ms", _T.INT, "1000",
              "How long a voter waits without hearing from a leader before it tries to become one; the actual "
              "timeout is drawn between this and twice this.", at_least(10)),
    ConfigDef("controller.quorum.fetch.timeout.ms", _T.INT, "2000",
              "How long a quorum leader keeps leading without fetches from a majority of the voters.",
              at_least(10)),
    ConfigDef("controller.quorum.request.timeout.ms", _T.INT, "2000",
              "How long a member of the metadata quorum waits for the answer to a request to another before it "
              "counts as failed.", at_least(1)),
    ConfigDef("controller.quorum.election.backoff.max.ms", _T.INT, "1000",
              "The most a metadata quorum candidate whose election failed waits (plus under 50 ms of jitter) before "
              "it stands again; the wait is random, from a range that doubles with each failure in a row.",
              at_least(0)),
    ConfigDef("controller.quorum.retry.backoff.ms", _T.INT, "20",
              "How long a member of the metadata quorum sends nothing to another after a request to it failed; a "
              "vote request of the election under way is then sent again.", at_least(0)),
    ConfigDef("controller.quorum.fetch.interval.ms", _T.INT, "25",
              "How often a follower of the metadata quorum fetches from the leader (a Moldau setting; the fetch "
              "is also the follower's heartbeat).", at_least(1)),
    ConfigDef("initial.broker.registration.timeout.ms", _T.INT, "60000",
              "How long a starting broker may take to register with the controller quorum; past it the process "
              "stops with an error instead of waiting for ever.", at_least(1)),
    ConfigDef("broker.heartbeat.interval.ms", _T.INT, "2000",
              "How often a broker heartbeats to the active controller.", at_least(1)),
    ConfigDef("log.dir.failure.timeout.ms", _T.LONG, "30000",
              "How long a broker may fail to tell the active controller that one of its log directories failed; "
              "past it the broker stops with an error, so that the controller fences it and moves its "
              "leaderships.", at_least(1)),
    ConfigDef("broker.session.timeout.ms", _T.INT, "9000",
              "How long the active controller waits without a heartbeat before it fences a broker and moves "
              "its leaderships.", at_least(1)),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", _T.LONG, "20971520",
              "How many bytes of metadata records accumulate before a node snapshots its metadata image and "
              "deletes the log below it.", at_least(1)),
    ConfigDef("metadata.log.max.snapshot.interval.ms", _T.LONG, "3600000",
              "The longest time a node waits to snapshot its metadata image while the log holds records the "
              "latest snapshot does not cover; 0: snapshots by size only.", at_least(0)),
    ConfigDef("controlled.shutdown.enable", _T.BOOLEAN, "true",
              "Whether a broker that stops asks the controller to move its leaderships away first."),
    ConfigDef("socket.request.max.bytes", _T.INT, "104857600",
              "The largest request the server accepts.", at_least(1)),
    # Kafka's defaults are a 50-connection backlog and 100 KiB socket buffers. Moldau's event loop accepts the
    # connections of a burst in batches, between requests, so a short backlog drops SYNs and costs clients a
    # one-second retransmit; and a fixed 100 KiB buffer caps one loopback connection well below what Linux's
    # buffer autotuning reaches (docs/architecture.md, "A request's path").
    ConfigDef("socket.listen.backlog.size", _T.INT, "1024",
              "Connections the kernel may hold for each listener before the server accepts them (the listen "
              "backlog, capped by the kernel's net.core.somaxconn). Kafka's default is 50.", at_least(1)),
    ConfigDef("socket.send.buffer.bytes", _T.INT, "-1",
              "The send buffer (SO_SNDBUF) of the server's sockets; -1 leaves it to the operating system, which "
              "grows it with the connection. Kafka's default is 102400.", SOCKET_BUFFER),
    ConfigDef("socket.receive.buffer.bytes", _T.INT, "-1",
              "The receive buffer (SO_RCVBUF) of the server's sockets; -1 leaves it to the operating system, "
              "which grows it with the connection. Kafka's default is 102400.", SOCKET_BUFFER),
    ConfigDef("queued.max.requests", _T.INT, "500",
              "Requests a connection may have queued before the server stops reading from it.", at_least(1)),
    ConfigDef("queued.max.request.bytes", _T.LONG, "268435456",
              "The bytes all connections together may hold for requests (partial and queued frames); while over "
              "it, connections stop reading. -1 is unbounded (Kafka's default); Moldau bounds it by default so "
              "that clients cannot push the broker's memory, and never below socket.request.max.bytes.",
              at_least(-1)),
    ConfigDef("max.request.partition.size.limit", _T.INT, "2000",
              "The most partitions one DescribeTopicPartitions response carries; a request asking for more gets "
              "this many and a cursor to the rest (KIP-966).", at_least(1)),
    ConfigDef("telemetry.max.bytes", _T.INT, "1048576",
              "The largest metrics payload a client may push (KIP-714's PushTelemetry).", at_least(1)),
    ConfigDef("connections.max.idle.ms", _T.LONG, "600000",
              "Connections with no traffic for this long are closed; -1 never closes them.", at_least(-1)),
    # Client quotas and connection limits (moldau.security.quotas, moldau.security.connection_quotas).
    ConfigDef("quota.window.num", _T.INT, "11",
              "The number of samples client quota rates are measured over.", at_least(1), dynamic=False),
    ConfigDef("quota.window.size.seconds", _T.INT, "1",
              "The time span of each sample of client quota rates.", at_least(1), dynamic=False),
    ConfigDef("controller.quota.window.num", _T.INT, "11",
              "The number of samples of the controller mutation quota: with the sample size, the seconds of "
              "its quota a client may create or delete partitions at once (the token bucket's size).",
              at_least(1), dynamic=False),
    ConfigDef("controller.quota.window.size.seconds", _T.INT, "1",
              "The time span of each sample of the controller mutation quota.", at_least(1), dynamic=False),
    ConfigDef("max.connections", _T.INT, "2147483647",
              "The connections the broker accepts at once on its client listeners; a connection over it is "
              "closed as it is accepted.", at_least(0), dynamic=False),
    ConfigDef("max.connection.creation.rate", _T.INT, "2147483647",
              "New connections per second the broker's client listeners accept together (KIP-612); faster ones "
              "wait to be served. listener.name.<listener>.max.connection.creation.rate limits one listener, and "
              "the connection_creation_rate quota of an ip entity one address. Read at start (Kafka also changes "
              "it at runtime).", at_least(0), dynamic=False),
    ConfigDef("max.connections.per.ip", _T.INT, "2147483647",
              "The connections the broker accepts at once from one IP address; a connection over it is closed "
              "as it is accepted.", at_least(0), dynamic=False),
    ConfigDef("max.connections.per.ip.overrides", _T.STRING, "",
              "Per-address exceptions to max.connections.per.ip, as host:count,host:count (IP addresses).",
              dynamic=False),
    ConfigDef("socket.request.read.timeout.ms", _T.LONG, "60000",
              "A connection that started sending a request and did not complete it within this time is closed, "
              "so stalled or trickling senders cannot hold memory; -1 disables it. Moldau's own setting.",
              at_least(-1)),
    ConfigDef("network.idle.poll.us", _T.INT, "500",
              "While requests arrive closer together than this (in microseconds), the event loop keeps polling "
              "its sockets for this long after the last one before it sleeps, yielding the CPU to other runnable "
              "threads each turn: a core woken from idle serves the next request at about twice the CPU of a "
              "busy one. Traffic sparser than this never polls. The default covers a client library's "
              "round trip on loopback; 0 sleeps as soon as the loop is idle. Moldau's own setting (Seastar's "
              "idle poll time).",
              Range(0, 100_000), dynamic=False),
    ConfigDef("fetch.zero.copy.enable", _T.BOOLEAN, "true",
              "Whether plaintext listeners send fetched record batches from the segment files with sendfile, "
              "without reading them into the broker (TLS listeners always copy). Moldau's own setting.",
              dynamic=False),
    ConfigDef("log.writeback.interval.bytes", _T.LONG, str(16 * 1024 * 1024),
              "Every this many bytes appended to a partition's active segment, their write-back to disk is started "
              "(without waiting for it, and without taking them out of the page cache), so that dirty pages do not "
              "pile up until the kernel throttles appends. It does not make acknowledged data durable: that is "
              "what replication and log.flush.interval.* do. -1 or 0 leaves write-back to the kernel, as Kafka "
              "does. Moldau's own setting.",
              at_least(-1), dynamic=False),
    ConfigDef("log.drop.behind.bytes", _T.LONG, str(256 * 1024 * 1024),
              "Bytes behind each partition log's end kept in the page cache: older appended bytes, once written "
              "back, are dropped from the cache, so that new appends reuse their memory (much faster on hosts "
              "that reclaim a guest's free memory); a consumer or follower reading further behind reads from "
              "disk. -1 keeps everything cached until the kernel needs the memory, as Kafka does. Moldau's own "
              "setting.",
              at_least(-1), dynamic=False),
    ConfigDef("num.network.threads", _T.INT, "3", "Threads for network requests." + _UNUSED, at_least(1),
              acted_on=False),
    ConfigDef("num.io.threads", _T.INT, "8", "Threads for request processing." + _UNUSED, at_least(1),
              acted_on=False),
    # TLS (moldau.security.tls): read for each SSL or SASL_SSL listener, where listener.name.<name>.<config>
    # overrides the plain config, and for this node's connections to other nodes.
    ConfigDef("ssl.keystore.type", _T.STRING, "JKS",
              "The format of the key store: JKS, PKCS12 (Java key stores; either format is read under either "
              "type, as Java reads them) or PEM.", dynamic=True),
    ConfigDef("ssl.keystore.location", _T.STRING, None,
              "The key store file with this node's private key and certificate chain: a JKS or PKCS12 store, "
              "or a PEM file with the chain and the key.", dynamic=True),
    ConfigDef("ssl.keystore.password", _T.PASSWORD, None,
              "The password of a JKS or PKCS12 key store; a PKCS12 store's key has the same one. Not used with "
              "PEM (an encrypted PEM key takes ssl.key.password).", dynamic=True),
    ConfigDef("ssl.keystore.certificate.chain", _T.PASSWORD, None,
              "This node's certificate chain in PEM, given inline instead of ssl.keystore.location.", dynamic=True),
    ConfigDef("ssl.keystore.key", _T.PASSWORD, None,
              "This node's private key in PEM, given inline with ssl.keystore.certificate.chain.", dynamic=True),
    ConfigDef("ssl.key.password", _T.PASSWORD, None,
              "The password of an encrypted PEM private key, or of the key in a JKS key store when it differs "
              "from ssl.keystore.password.", dynamic=True),
    ConfigDef("ssl.truststore.type", _T.STRING, "JKS",
              "The format of the trust store: JKS, PKCS12 or PEM.", dynamic=True),
    ConfigDef("ssl.truststore.location", _T.STRING, None,
              "The trust store file with the CA certificates trusted to sign peers' certificates (clients' when "
              "client authentication is on, other nodes' for this node's own connections): a JKS or PKCS12 "
              "store, or a PEM file.", dynamic=True),
    ConfigDef("ssl.truststore.certificates", _T.PASSWORD, None,
              "Trusted CA certificates in PEM, given inline instead of ssl.truststore.location.", dynamic=True),
    ConfigDef("ssl.truststore.password", _T.PASSWORD, None,
              "The password of a JKS or PKCS12 trust store. Without it a JKS store's integrity is not checked (as "
              "in Java); a PKCS12 store written by keytool cannot be read without it.", dynamic=True),
    ConfigDef("ssl.client.auth", _T.STRING, "none",
              "Whether clients of an SSL listener must present a certificate (required), may (requested) or "
              "are not asked (none). A client's certificate subject becomes its principal.",
              OneOf(("required", "requested", "none"))),
    ConfigDef("ssl.enabled.protocols", _T.LIST, "TLSv1.2,TLSv1.3", "The TLS versions accepted.",
              ListOf(("TLSv1.2", "TLSv1.3"))),
    ConfigDef("ssl.protocol", _T.STRING, "TLSv1.3",
              "The newest TLS version used (TLS or TLSv1.3: 1.3; TLSv1.2: 1.2).",
              OneOf(("TLS", "TLSv1.2", "TLSv1.3"))),
    ConfigDef("ssl.cipher.suites", _T.LIST, "",
              "The cipher suites allowed for TLS 1.2, by their standard (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) "
              "or OpenSSL names; empty allows OpenSSL's defaults. TLS 1.3 suites are always OpenSSL's."),
    ConfigDef("ssl.endpoint.identification.algorithm", _T.STRING, "https",
              "When this node connects to another over TLS, https checks that the peer's certificate names "
              "the host connected to; empty skips the check."),
    ConfigDef("ssl.principal.mapping.rules", _T.STRING, "DEFAULT",
              "How a client certificate's subject (RFC 2253, e.g. CN=alice,OU=eng,O=Acme) becomes the user "
              "name: comma-separated RULE:pattern/replacement/[LU] entries and DEFAULT (the subject "
              "unchanged), the first that matches wins."),
    ConfigDef("ssl.allow.dn.changes", _T.BOOLEAN, "false",
              "Whether a key store replaced at runtime may hold a certificate with another subject "
              "(distinguished name) than the current one; false refuses the change.", dynamic=False),
    ConfigDef("ssl.allow.san.changes", _T.BOOLEAN, "false",
              "Whether a key store replaced at runtime may hold a certificate without some of the current one's "
              "subject alternative names; false refuses the change.", dynamic=False),
    # SASL (moldau.security.sasl). Per listener, `listener.name.<listener>.<config>` overrides
    # sasl.enabled.mechanisms, and `listener.name.<listener>.<mechanism>.sasl.jaas.config` sasl.jaas.config.
    ConfigDef("sasl.enabled.mechanisms", _T.LIST, "GSSAPI",
              "The SASL mechanisms SASL_PLAINTEXT and SASL_SSL listeners accept: PLAIN, SCRAM-SHA-256, "
              "SCRAM-SHA-512, OAUTHBEARER. GSSAPI (Kerberos, Kafka's default) is not supported: a SASL "
              "listener that enables none of the supported ones refuses to start."),
    ConfigDef("sasl.jaas.config", _T.PASSWORD, None,
              "JAAS login module configuration in Kafka's syntax. For PLAIN, user_<name>=\"<password>\" options "
              "are the accepted users; username and password are the broker's own credentials."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", _T.STRING, "GSSAPI",
              "The SASL mechanism brokers use with each other when inter.broker.listener.name is a SASL "
              "listener; the broker's own credentials are the username and password of that mechanism's JAAS "
              "config on that listener."),
    ConfigDef("sasl.mechanism.controller.protocol", _T.STRING, "GSSAPI",
              "The SASL mechanism nodes use with the controllers when the controller listener is a SASL "
              "listener; only PLAIN works there (SCRAM credentials live in the metadata log the controllers "
              "replicate). The node's own credentials are the username and password of the PLAIN JAAS config on "
              "that listener."),
    ConfigDef("connections.max.reauth.ms", _T.LONG, "0",
              "Longest lifetime of a SASL session (KIP-368): clients must re-authenticate before it ends, and a "
              "connection that sends any other request after it ended is closed. 0 disables expiry.",
              at_least(0)),
    ConfigDef("connection.failed.authentication.delay.ms", _T.INT, "100",
              "How long the answer to a failed authentication is held back (the connection then closes), so "
              "credentials cannot be guessed at wire speed.", at_least(0)),
    # Delegation tokens (KIP-48): moldau.security.delegation_tokens.
    ConfigDef("delegation.token.secret.key", _T.PASSWORD, None,
              "The key the HMAC of every delegation token is made with; the same on every node. Unset: delegation "
              "tokens are off (token requests get DELEGATION_TOKEN_AUTH_DISABLED). Changing it invalidates every "
              "token."),
    ConfigDef("delegation.token.max.lifetime.ms", _T.LONG, "604800000",
              "The longest a delegation token lives, renewed or not; a creator may ask for less.", at_least(1)),
    ConfigDef("delegation.token.expiry.time.ms", _T.LONG, "86400000",
              "How long a delegation token lives after it is created or renewed, unless renewed again; a renewal "
              "may ask for less.", at_least(1)),
    ConfigDef("delegation.token.expiry.check.interval.ms", _T.LONG, "3600000",
              "How often the active controller deletes the delegation tokens past their expiry (a token past it is "
              "refused at once, whether deleted yet or not).", at_least(1)),
    ConfigDef("sasl.server.max.receive.size", _T.INT, "524288",
              "The largest request a client may send on a SASL listener before it has authenticated; a larger "
              "one closes the connection. socket.request.max.bytes applies once it has.", at_least(1)),
    # OAUTHBEARER with signed tokens (KIP-768): read when a listener's OAUTHBEARER server callback handler is
    # Kafka's OAuthBearerValidatorCallbackHandler; each may be given per listener as
    # listener.name.<listener>.oauthbearer.<config>.
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", _T.STRING, None,
              "Where the identity provider publishes its signing keys (a JWKS document): an https, http or file "
              "URL. Tokens must be signed by one of these keys."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", _T.LONG, "3600000",
              "How often the JWKS is fetched again; a token naming an unknown key id also fetches it at once "
              "(at most once a second). 0 fetches it only then.", at_least(0)),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _T.LONG, "100",
              "The wait before fetching the JWKS again after a failed fetch; it doubles with each failure.",
              at_least(0)),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _T.LONG, "10000",
              "The longest wait between failed fetches of the JWKS.", at_least(0)),
    ConfigDef("sasl.oauthbearer.expected.audience", _T.LIST, "",
              "Audiences a token's aud claim must name one of; empty: aud is not checked."),
    ConfigDef("sasl.oauthbearer.expected.issuer", _T.STRING, None,
              "The issuer a token's iss claim must equal; unset: iss is not checked."),
    ConfigDef("sasl.oauthbearer.sub.claim.name", _T.STRING, "sub",
              "The claim holding the principal's name: the connection acts as User:<its value>."),
    ConfigDef("sasl.oauthbearer.scope.claim.name", _T.STRING, "scope", "The claim holding the token's scope."),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", _T.INT, "30",
              "How far the broker's clock and the identity provider's may differ when exp and nbf are checked.",
              at_least(0)),
    # The broker's own OAUTHBEARER login, when sasl.mechanism.inter.broker.protocol is OAUTHBEARER (the JAAS
    # options clientId, clientSecret and scope of the listener's OAuthBearerLoginModule say the same).
    ConfigDef("sasl.oauthbearer.token.endpoint.url", _T.STRING, None,
              "Where the broker gets its own tokens for the inter-broker listener (OAuth 2 client credentials): "
              "an https or http URL, or a file: URL naming a file that holds the token."),
    ConfigDef("sasl.oauthbearer.client.credentials.client.id", _T.STRING, None,
              "The broker's client id at the token endpoint."),
    ConfigDef("sasl.oauthbearer.client.credentials.client.secret", _T.PASSWORD, None,
              "The broker's client secret at the token endpoint."),
    ConfigDef("sasl.oauthbearer.scope", _T.STRING, None, "The scope the broker asks the token endpoint for."),
    # Topics.
    ConfigDef("num.partitions", _T.INT, "1", "The default number of partitions of a new topic.",
              at_least(1), dynamic=True),
    ConfigDef("default.replication.factor", _T.INT, "1",
              "The default replication factor of a new topic.", at_least(1)),
    ConfigDef("auto.create.topics.enable", _T.BOOLEAN, "true",
              "Create a topic when a client asks for metadata of a topic that does not exist."),
    ConfigDef("delete.topic.enable", _T.BOOLEAN, "true", "Allow topics to be deleted."),
    # Log storage.
    ConfigDef("log.dir", _T.STRING, "./data", "The data directory, used when log.dirs is not set.",
              NON_EMPTY),
    ConfigDef("log.dirs", _T.LIST, None, "Comma-separated data directories; overrides log.dir.", PATHS),
    ConfigDef("metadata.log.dir", _T.STRING, None,
              "The directory of the metadata log (its __cluster_metadata directory); unset, the first of "
              "log.dirs. It may be one of log.dirs or a directory of its own, e.g. on another disk.", NON_EMPTY),
    _log("log.retention.ms", _T.LONG, None, "retention.ms",
         "How long to keep a log segment before deleting it; -1 means no limit. Wins over "
         "log.retention.minutes and log.retention.hours.", at_least(-1)),
    _log("log.retention.minutes", _T.INT, None, "retention.ms",
         "Retention in minutes, used when log.retention.ms is not set.", at_least(-1), dynamic=False),
    _log("log.retention.hours", _T.INT, "168", "retention.ms",
         "Retention in hours, used when neither log.retention.ms nor log.retention.minutes is set.",
         at_least(-1), dynamic=False),
    _log("log.retention.bytes", _T.LONG, "-1", "retention.bytes",
         "The size a partition's log may reach before old segments are deleted; -1 means no limit."),
    _log("log.segment.bytes", _T.INT, "1073741824", "segment.bytes",
         "The largest size of a single log segment.", at_least(14)),
    _log("log.roll.ms", _T.LONG, None, "segment.ms",
         "The time after which a new segment is rolled; wins over log.roll.hours.", at_least(1)),
    _log("log.roll.hours", _T.INT, "168", "segment.ms",
         "The time in hours after which a new segment is rolled.", at_least(1), dynamic=False),
    _log("log.roll.jitter.ms", _T.LONG, None, "segment.jitter.ms",
         "The largest random jitter subtracted from the roll time, drawn per segment so that partitions do not "
         "all roll at once; wins over log.roll.jitter.hours.", at_least(0)),
    _log("log.roll.jitter.hours", _T.INT, "0", "segment.jitter.ms",
         "The largest roll jitter in hours.", at_least(0), dynamic=False),
    _log("log.index.interval.bytes", _T.INT, "4096", "index.interval.bytes",
         "Bytes of log between two offset index entries.", at_least(0)),
    _log("log.index.size.max.bytes", _T.INT, "10485760", "segment.index.bytes",
         "The largest size of an offset index file.", at_least(4)),
    _log("log.flush.interval.messages", _T.LONG, _LONG_MAX, "flush.messages",
         "Messages appended to a partition before its log is flushed to disk.", at_least(1)),
    _log("log.flush.interval.ms", _T.LONG, None, "flush.ms",
         "Time a message may stay unflushed; log.flush.scheduler.interval.ms when unset.", at_least(0)),
    _log("log.flush.scheduler.interval.ms", _T.LONG, _LONG_MAX, "flush.ms",
         "How often logs are checked for flushing.", at_least(0), dynamic=False, acted_on=False),
    ConfigDef("log.retention.check.interval.ms", _T.LONG, "300000",
              "How often logs are checked for segments to delete.", at_least(1)),
    _log("log.message.timestamp.type", _T.STRING, "CreateTime", "message.timestamp.type",
         "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
         TIMESTAMP_TYPES),
    _log("log.message.timestamp.before.max.ms", _T.LONG, _LONG_MAX, "message.timestamp.before.max.ms",
         "How far a CreateTime timestamp may lie before the broker's clock.", at_least(0)),
    _log("log.message.timestamp.after.max.ms", _T.LONG, "3600000", "message.timestamp.after.max.ms",
         "How far a CreateTime timestamp may lie after the broker's clock.", at_least(0)),
    _log("log.cleanup.policy", _T.LIST, "delete", "cleanup.policy",
         "What to do with old segments: delete, compact, or both.", CLEANUP_POLICIES),
    _log("log.cleaner.delete.retention.ms", _T.LONG, "86400000", "delete.retention.ms",
         "How long tombstones are kept in compacted topics.", at_least(0)),
    _log("log.cleaner.min.compaction.lag.ms", _T.LONG, "0", "min.compaction.lag.ms",
         "The least time a record stays uncompacted.", at_least(0)),
    _log("log.cleaner.max.compaction.lag.ms", _T.LONG, _LONG_MAX, "max.compaction.lag.ms",
         "The most time a record stays uncompacted.", at_least(1)),
    _log("log.cleaner.min.cleanable.ratio", _T.DOUBLE, "0.5", "min.cleanable.dirty.ratio",
         "The share of dirty log that makes a log eligible for cleaning.", Range(0, 1)),
    ConfigDef("log.cleaner.dedupe.buffer.size", _T.LONG, "134217728",
              "Memory for the log cleaner's key-to-offset maps, in bytes, shared by its threads.",
              at_least(1024 * 1024), dynamic=True),
    ConfigDef("log.cleaner.enable", _T.BOOLEAN, "true",
              "Whether compacted topics are cleaned; off, they keep every record and grow."),
    ConfigDef("log.cleaner.threads", _T.INT, "1",
              "How many logs are cleaned at a time, each on its own thread (0: none).", at_least(0), dynamic=True),
    ConfigDef("log.cleaner.backoff.ms", _T.LONG, "15000",
              "How long the cleaner waits to look again after finding no log to clean.", at_least(0),
              dynamic=True),
    ConfigDef("log.cleaner.io.max.bytes.per.second", _T.DOUBLE, "1.7976931348623157E308",
              "The bytes per second all cleaner threads together may read and write.", Range(low=1),
              dynamic=True),
    ConfigDef("log.cleaner.io.buffer.size", _T.INT, "524288",
              "The cleaner's I/O buffers, shared by its threads; each cleaning reads in pieces of half its share "
              "(at least 4 KiB).", at_least(0), dynamic=True),
    ConfigDef("log.cleaner.io.buffer.load.factor", _T.DOUBLE, "0.9",
              "How full a cleaning fills its key-to-offset map before it stops mapping.", Range(0, 1),
              dynamic=True),
    _log("log.segment.delete.delay.ms", _T.LONG, "60000", "file.delete.delay.ms",
         "How long a deleted segment's files stay on disk.", at_least(0)),
    _log("log.preallocate", _T.BOOLEAN, "false", "preallocate",
         "Preallocate segment files on creation.", acted_on=False),
    _log("log.message.downconversion.enable", _T.BOOLEAN, "true", "message.downconversion.enable",
         "Convert records to older formats for old consumers.", acted_on=False),
    _log("compression.type", _T.STRING, "producer", "compression.type",
         "The codec records are stored in: producer keeps each batch as sent; any other codec (or "
         "uncompressed) has the broker recompress batches sent in another one.", COMPRESSION_TYPES),
    _log("compression.gzip.level", _T.INT, "-1", "compression.gzip.level",
         "The gzip level of batches the broker compresses: 1 to 9, or -1 for zlib's default.", GZIP_LEVELS),
    _log("compression.lz4.level", _T.INT, "9", "compression.lz4.level",
         "The lz4 level of batches the broker compresses (levels above 16 compress as 16).", Range(1, 17)),
    _log("compression.zstd.level", _T.INT, "3", "compression.zstd.level",
         "The zstd level of batches the broker compresses.", Range(-131072, 22)),
    _log("message.max.bytes", _T.INT, "1048588", "max.message.bytes",
         "The largest record batch the server accepts.", at_least(0)),
    # Replication.
    _log("min.insync.replicas", _T.INT, "1", "min.insync.replicas",
         "Replicas that must acknowledge an acks=all write.", at_least(1)),
    _log("unclean.leader.election.enable", _T.BOOLEAN, "false", "unclean.leader.election.enable",
         "Allow an out-of-sync replica to become leader, at the risk of losing data."),
    ConfigDef("replica.lag.time.max.ms", _T.LONG, "30000",
              "A follower that has not caught up with its leader for this long leaves the ISR.", at_least(1)),
    ConfigDef("replica.fetch.wait.max.ms", _T.INT, "500",
              "How long a follower's fetch waits at the leader for new records.", at_least(0)),
    ConfigDef("replica.fetch.min.bytes", _T.INT, "1",
              "The bytes a follower's fetch waits for at the leader.", at_least(1)),
    ConfigDef("fetch.max.bytes", _T.INT, "57671680",
              "The most a Fetch or ShareFetch response carries: a max_bytes above it is lowered to it, and min_bytes "
              "with it (the first batch of the first partition with data is still returned whole).",
              at_least(1024)),
    ConfigDef("replica.fetch.max.bytes", _T.INT, "1048576",
              "The bytes a follower fetches per partition (at least one batch).", at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", _T.INT, "10485760",
              "The bytes a follower fetches per request (at least one batch).", at_least(0)),
    ConfigDef("replica.fetch.backoff.ms", _T.INT, "1000",
              "How long a follower waits after a failed fetch.", at_least(0)),
    ConfigDef("num.replica.fetchers", _T.INT, "1",
              "The fetch loops a follower runs towards each leader broker, each with its own connection and fetch "
              "session; a partition goes to the one Kafka would give it. More let several fetches to one leader be "
              "out at once. A change moves the followed partitions among the new number at once.", at_least(1),
              dynamic=True),
    ConfigDef("replica.selector.class", _T.STRING, None,
              "How leaders choose the replica a consumer reads from (KIP-392): "
              "org.apache.kafka.common.replica.RackAwareReplicaSelector sends consumers to a replica in their "
              "client.rack; unset (or LeaderSelector) keeps them on the leader.", OneOf(SELECTORS)),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", _T.LONG, "9223372036854775807",
              "The bytes per second that moving replicas between this broker's log directories may copy.",
              at_least(1), dynamic=True),
    # Replication quotas (moldau.replication.throttle): Kafka sets the rates per broker only; a cluster-wide value
    # applies here too, under each broker's own.
    ConfigDef("leader.replication.throttled.rate", _T.LONG, "9223372036854775807",
              "The bytes per second this broker sends, as leader, to followers of the replicas its topics' "
              "leader.replication.throttled.replicas name (replicas out of the ISR only).", at_least(0),
              dynamic=True),
    ConfigDef("follower.replication.throttled.rate", _T.LONG, "9223372036854775807",
              "The bytes per second this broker fetches, as follower, for the replicas its topics' "
              "follower.replication.throttled.replicas name (replicas out of the ISR only).", at_least(0),
              dynamic=True),
    ConfigDef("replication.quota.window.num", _T.INT, "11",
              "The windows over which replication quotas measure rates.", at_least(1)),
    ConfigDef("replication.quota.window.size.seconds", _T.INT, "1",
              "The length of each window replication quotas measure rates over.", at_least(1)),
    ConfigDef("replica.socket.timeout.ms", _T.INT, "30000",
              "How long a follower waits for a fetch answer beyond the leader's wait.", at_least(1)),
    ConfigDef("replica.socket.receive.buffer.bytes", _T.INT, "-1",
              "The receive buffer (SO_RCVBUF) of a follower's connections to the leaders it fetches from; -1 "
              "leaves it to the operating system, which grows it with the connection. Kafka's default is 65536.",
              SOCKET_BUFFER),
    ConfigDef("request.timeout.ms", _T.INT, "30000",
              "How long a broker waits for another broker's answer to a request with no bound of its own: "
              "transaction markers and their checks, share-group state, dead-letter records.", at_least(1)),
    ConfigDef("controller.socket.timeout.ms", _T.INT, "30000",
              "How long one attempt of a request to the active controller may take (registration, heartbeats, "
              "forwarded admin requests); an attempt also ends when leadership moves, and the call tries again.",
              at_least(1)),
    ConfigDef("socket.connection.setup.timeout.ms", _T.LONG, "10000",
              "How long opening a connection to another node may take (TCP and TLS handshakes); doubled with "
              "each consecutive failure to reach the same node, up to socket.connection.setup.timeout.max.ms, "
              "with 20% jitter.", at_least(1)),
    ConfigDef("socket.connection.setup.timeout.max.ms", _T.LONG, "30000",
              "The most socket.connection.setup.timeout.ms grows to after consecutive failures to open a "
              "connection to a node.", at_least(1)),
    ConfigDef("max.incremental.fetch.session.cache.slots", _T.INT, "1000",
              "The incremental fetch sessions (KIP-227) the broker keeps at once, followers' and consumers'; 0 "
              "makes every fetch a full one.", at_least(0), dynamic=False),
    ConfigDef("min.incremental.fetch.session.eviction.ms", _T.INT, "120000",
              "How long a fetch session is kept from being evicted for a new one: a session unused for this long "
              "may be evicted first, and one that has existed this long may give way to a more valuable one (a "
              "follower's, or one with more partitions). Kafka's fixed value, a setting in Moldau.",
              at_least(0), dynamic=False),
    ConfigDef("auto.leader.rebalance.enable", _T.BOOLEAN, "true",
              "Move leadership back to preferred replicas when brokers are imbalanced."),
    ConfigDef("leader.imbalance.check.interval.seconds", _T.LONG, "300",
              "How often the controller checks leader balance.", at_least(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", _T.INT, "10",
              "The share of a broker's preferred leaderships held elsewhere that triggers a rebalance.",
              at_least(0)),
    # Consumer groups and transactions.
    ConfigDef("offsets.topic.num.partitions", _T.INT, "50",
              "Partitions of the committed offsets topic.", at_least(1)),
    ConfigDef("offsets.topic.replication.factor", _T.SHORT, "3",
              "Replication factor of the committed offsets topic; capped at the number of registered brokers "
              "when it is created.", at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", _T.INT, "104857600",
              "segment.bytes of the committed offsets topic when it is created (kept small so that compaction "
              "and loading are fast).", at_least(1)),
    ConfigDef("offsets.topic.compression.codec", _T.INT, "0",
              "The codec of every batch the group coordinator appends to the committed offsets topic (offsets, "
              "groups, transactional offset commits): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd, at the codec's "
              "default level.", CODEC_IDS),
    ConfigDef("offsets.load.buffer.size", _T.INT, "5242880",
              "How many bytes of the committed offsets topic a broker reads at a time when it loads a partition "
              "it has become the leader of (a soft limit: a larger batch is read whole).", at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", _T.INT, "5000",
              "How long an offset commit waits to be on every in-sync replica of the offsets topic.", at_least(1)),
    ConfigDef("offsets.retention.minutes", _T.INT, "10080",
              "How long committed offsets of an empty group are kept.", at_least(1)),
    ConfigDef("group.initial.rebalance.delay.ms", _T.INT, "3000",
              "How long a new group waits for more members before its first rebalance. `moldau server` "
              "without a properties file starts with 0 instead, as Kafka's stock server.properties does.",
              at_least(0)),
    ConfigDef("group.min.session.timeout.ms", _T.INT, "6000",
              "The shortest session timeout a consumer may ask for.", at_least(0)),
    ConfigDef("group.max.session.timeout.ms", _T.INT, "1800000",
              "The longest session timeout a consumer may ask for.", at_least(0)),
    ConfigDef("group.max.size", _T.INT, "2147483647",
              "The most members a consumer group may have.", at_least(1)),
    ConfigDef("group.coordinator.rebalance.protocols", _T.LIST, "classic,consumer,streams",
              "The group protocols the coordinators serve: classic must be listed; without consumer, KIP-848's "
              "ConsumerGroupHeartbeat and ConsumerGroupDescribe are turned off (not advertised, refused with "
              "UNSUPPORTED_VERSION) and consumers use the classic protocol. share and streams are accepted and "
              "change nothing (share groups follow share.version; streams groups are not offered).",
              _REBALANCE_PROTOCOLS),
    ConfigDef("group.coordinator.append.linger.ms", _T.INT, "-1",
              "How long offset commits wait to be appended together, one batch per partition of the committed "
              "offsets topic: 0 appends each at once, N waits up to N ms after the first, -1 (adaptive) waits for "
              "the requests already read in the same turn of the event loop, not at all when there are none. Only "
              "offset commits wait (transactional ones do not), and any other request to the coordinator appends "
              "the waiting ones first.", Range(low=-1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", _T.INT, "5000",
              "How often members of consumer (KIP-848) groups are asked to heartbeat.", at_least(1)),
    ConfigDef("group.consumer.session.timeout.ms", _T.INT, "45000",
              "How long a member of a consumer (KIP-848) group may go without a heartbeat before it is "
              "removed.", at_least(1)),
    ConfigDef("group.consumer.assignors", _T.LIST, "uniform,range",
              "The server-side assignors of consumer (KIP-848) groups; the first is the default.",
              ListOf(("uniform", "range"))),
    ConfigDef("group.consumer.max.size", _T.INT, "2147483647",
              "The most members a consumer (KIP-848) group may have.", at_least(1)),
    ConfigDef("group.consumer.migration.policy", _T.STRING, "bidirectional",
              "Which conversions of a group with members are allowed: bidirectional, upgrade (classic to "
              "consumer when a consumer-protocol member joins), downgrade (back to classic when the last one "
              "leaves) or disabled. Groups without members convert either way.", _MIGRATION_POLICIES),
    ConfigDef("group.share.heartbeat.interval.ms", _T.INT, "5000",
              "How often members of share groups are asked to heartbeat.", at_least(1)),
    ConfigDef("group.share.session.timeout.ms", _T.INT, "45000",
              "How long a member of a share group may go without a heartbeat before it is removed and the "
              "records it holds are released.", at_least(1)),
    ConfigDef("group.share.max.size", _T.INT, "200",
              "The most members a share group may have.", at_least(1)),
    ConfigDef("group.share.max.share.sessions", _T.INT, "2000",
              "The most share sessions this broker holds (one per member fetching here); opening one more is "
              "SHARE_SESSION_LIMIT_REACHED. At least group.share.max.size.", at_least(1)),
    ConfigDef("group.share.record.lock.duration.ms", _T.INT, "30000",
              "How long a record handed to a share group member stays locked to it before it is made "
              "available again.", at_least(1)),
    ConfigDef("group.share.delivery.count.limit", _T.INT, "5",
              "How many times a share group may deliver a record before it is archived.", at_least(1)),
    ConfigDef("group.share.partition.max.record.locks", _T.INT, "2000",
              "The most records of one share-partition in flight at once.", at_least(1)),
    ConfigDef("share.coordinator.state.topic.num.partitions", _T.INT, "50",
              "Partitions of the share-group state topic.", at_least(1)),
    ConfigDef("share.coordinator.state.topic.replication.factor", _T.SHORT, "3",
              "Replication factor of the share-group state topic; capped at the number of registered brokers "
              "when it is created.", at_least(1)),
    ConfigDef("share.coordinator.state.topic.min.isr", _T.SHORT, "2",
              "min.insync.replicas of the share-group state topic; capped at its replication factor.",
              at_least(1)),
    ConfigDef("share.coordinator.state.topic.segment.bytes", _T.INT, "104857600",
              "segment.bytes of the share-group state topic when it is created.", at_least(1)),
    ConfigDef("share.coordinator.state.topic.compression.codec", _T.INT, "0",
              "The codec of every batch the share coordinator appends to the share-group state topic: 0 none, "
              "1 gzip, 2 snappy, 3 lz4, 4 zstd, at the codec's default level.", CODEC_IDS),
    ConfigDef("share.coordinator.append.linger.ms", _T.INT, "-1",
              "How long share-group state writes wait to be appended together, one batch per partition of the "
              "share-group state topic: 0 appends each at once, N waits up to N ms after the first, -1 (adaptive) "
              "waits for the requests already read in the same turn of the event loop, not at all when there are "
              "none.", Range(low=-1)),
    ConfigDef("share.coordinator.load.buffer.size", _T.INT, "5242880",
              "How many bytes of the share-group state topic a broker reads at a time when it loads a partition "
              "it has become the leader of (a soft limit: a larger batch is read whole).", at_least(1)),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", _T.INT, "500",
              "How many ShareUpdate records the share coordinator writes for a share-partition before it writes "
              "a whole ShareSnapshot again.", at_least(0)),
    ConfigDef("share.isolation.level", _T.STRING, "read_uncommitted",
              "How share groups of this broker read transactional records: read_committed never delivers "
              "records of aborted transactions nor goes past the last stable offset.",
              OneOf(("read_uncommitted", "read_committed"))),
    ConfigDef("share.auto.offset.reset", _T.STRING, "latest",
              "Where a share group starts on a partition it has never consumed, unless the group's own "
              "share.auto.offset.reset says otherwise: latest, earliest or by_duration:<ISO-8601 duration>.",
              AUTO_OFFSET_RESET),
    # The bounds of the group configs (GROUP config resources) that override group.consumer.* / group.share.*.
    *_bounds("group.consumer", "session.timeout.ms", 45000, 60000, "session timeout of a consumer (KIP-848) group"),
    *_bounds("group.consumer", "heartbeat.interval.ms", 5000, 15000,
             "heartbeat interval of a consumer (KIP-848) group"),
    *_bounds("group.share", "session.timeout.ms", 45000, 60000, "session timeout of a share group"),
    *_bounds("group.share", "heartbeat.interval.ms", 5000, 15000, "heartbeat interval of a share group"),
    *_bounds("group.share", "record.lock.duration.ms", 15000, 3600000, "record lock duration of a share group"),
    *_bounds("group.share", "delivery.count.limit", 2, 10, "delivery count limit of a share group"),
    *_bounds("group.share", "partition.max.record.locks", 100, 10000,
             "share.partition.max.record.locks of a share group"),
    ConfigDef("offset.metadata.max.bytes", _T.INT, "4096",
              "The largest metadata string a committed offset may carry.", at_least(0)),
    ConfigDef("offsets.retention.check.interval.ms", _T.LONG, "600000",
              "How often committed offsets are checked for expiry.", at_least(1)),
    ConfigDef("transactional.id.expiration.ms", _T.INT, "604800000",
              "How long an idle transactional id is kept.", at_least(1)),
    ConfigDef("transaction.max.timeout.ms", _T.INT, "900000",
              "The longest transaction timeout a producer may ask for.", at_least(1)),
    ConfigDef("transaction.state.log.num.partitions", _T.INT, "50",
              "Partitions of the transaction state topic.", at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", _T.SHORT, "3",
              "Replication factor of the transaction state topic; capped at the number of registered brokers "
              "when it is created.", at_least(1)),
    ConfigDef("transaction.state.log.min.isr", _T.INT, "2",
              "min.insync.replicas of the transaction state topic; capped at its replication factor.", at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", _T.INT, "104857600",
              "Segment size of the transaction state topic.", at_least(1)),
    ConfigDef("transaction.state.log.load.buffer.size", _T.INT, "5242880",
              "How many bytes of the transaction state topic a broker reads at a time when it loads a partition "
              "it has become the leader of (a soft limit: a larger batch is read whole).", at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _T.INT, "10000",
              "How often the transaction coordinator aborts transactions that outlived their timeout.",
              at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _T.INT, "3600000",
              "How often the transaction coordinator forgets transactional ids idle for "
              "transactional.id.expiration.ms.", at_least(1)),
    ConfigDef("transaction.partition.verification.enable", _T.BOOLEAN, "true",
              "Before the first transactional write to a partition, ask the transaction coordinator whether the "
              "partition is in the producer's transaction (KIP-890), so a late write cannot join a finished one."),
    ConfigDef("producer.id.expiration.ms", _T.INT, "86400000",
              "How long an idle producer id's state is kept.", at_least(1)),
    # The console's HTTP listener (moldau.console): /metrics today.
    ConfigDef("console.listeners", _T.STRING, "http://127.0.0.1:8080",
              "Where this node serves its console's HTTP listener, with Prometheus metrics at /metrics, as "
              "http://host:port or https://host:port (port 0: any free port; https takes its certificate from the "
              "ssl.* configs, which listener.name.console.ssl.* overrides); empty turns it off.", HTTP_LISTENER),
    ConfigDef("console.connect.urls", _T.LIST, "",
              "Kafka Connect workers' REST APIs (http://host:port, comma-separated) whose connectors the console's "
              "Connectors page lists, pauses, resumes and restarts; the first that answers is used. Empty: the "
              "page says how to set it."),
    ConfigDef("console.max.connections", _T.INT, "1000",
              "Connections the console's HTTP listener holds at once; one more is answered 503 and closed.",
              at_least(1)),
    ConfigDef("console.request.header.timeout.ms", _T.INT, "10000",
              "Time a client of the console's HTTP listener has to send a whole request head (request line and "
              "headers), from connecting or from its previous response; then it is answered 408 and closed.",
              at_least(1)),
    ConfigDef("console.max.request.bytes", _T.INT, "16777216",
              "The largest request body the console's HTTP listener takes; a larger one is answered 413.",
              at_least(0)),
    # The schema registry (Confluent Schema Registry's REST API, docs/registry.md).
    ConfigDef("schema.registry.listeners", _T.STRING, "http://127.0.0.1:8081",
              "Where this broker serves the schema registry's REST API, as http://host:port or https://host:port "
              "(port 0: any free port); empty turns the HTTP listener off. Every broker serves the same "
              "registry, kept in the _schemas topic. https takes its certificate from the ssl.* configs "
              "(listener.name.schema_registry.ssl.* overrides them).", HTTP_LISTENER),
    ConfigDef("schema.registry.authentication.method", _T.STRING, "NONE",
              "How the registry's HTTP clients authenticate: NONE, or BASIC (HTTP Basic authentication with the "
              "cluster's SASL users: PLAIN users of the JAAS configs and SCRAM users).", OneOf(("NONE", "BASIC")),
              dynamic=False),
    ConfigDef("schema.registry.authentication.realm", _T.STRING, "SchemaRegistry",
              "The realm named in the registry's WWW-Authenticate header.", dynamic=False),
    # Authorization (ACLs).
    ConfigDef("authorizer.class.name", _T.STRING, "",
              "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer checks every request "
              "against the ACLs in the metadata log; empty means no authorization (everyone may do everything).",
              dynamic=False),
    ConfigDef("super.users", _T.STRING, "",
              "Semicolon-separated principals (User:admin;User:broker) that may do everything when an "
              "authorizer is configured.", dynamic=False),
    ConfigDef("allow.everyone.if.no.acl.found", _T.BOOLEAN, "false",
              "With an authorizer, allow every principal to act on a resource that has no ACL at all.",
              dynamic=False),
)

_KAFKA_TYPES = {t.name.lower(): t for t in ConfigType if t is not ConfigType.UNKNOWN}


def _kafka_only(config: KafkaBrokerConfig) -> ConfigDef:
    """A Kafka 4.2 broker config Moldau has no use for: typed as Kafka types it, so a bad value is refused,
    dynamic where Kafka's update mode allows, never acted on."""
    return ConfigDef(config.name, _KAFKA_TYPES[config.type], config.default, NO_EFFECT_DOC, None,
                     config.update_mode != READ_ONLY, _TOPIC_DEFAULT_OF.get(config.name), acted_on=False)


# The Kafka-only broker configs that supply a topic config's default.
_TOPIC_DEFAULT_OF = {"log.local.retention.bytes": "local.retention.bytes",
                     "log.local.retention.ms": "local.retention.ms"}


NO_EFFECT_DOC = "A Kafka broker config Moldau has no use for: stored and described, no effect."
_DEFINED = {d.name for d in _BROKER_DEFS}
# Defined by Kafka, with no definition above: kept apart so docs/configuration.md can say they have no effect.
KAFKA_ONLY_BROKER_CONFIGS: frozenset[str] = frozenset(c.name for c in KAFKA_BROKER_CONFIGS if c.name not in _DEFINED)

BROKER_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in (
    *_BROKER_DEFS, *(_kafka_only(c) for c in KAFKA_BROKER_CONFIGS if c.name in KAFKA_ONLY_BROKER_CONFIGS))}


def dynamic_broker_config_names() -> frozenset[str]:
    """The broker configs that may be changed at runtime; all others are read-only."""
    return frozenset(name for name, d in BROKER_CONFIGS.items() if d.dynamic)
