#!/usr/bin/env bash
# Local single-node Apache Kafka (KRaft) and a Confluent-API schema registry
# (Apicurio Registry, KafkaSQL storage: its schemas live in the broker).
# Both bind to loopback. Artifacts come from Maven Central through
# infra/kafka/pom.xml into .local/ (git-ignored); data lives in .local/kafka.
#
#   scripts/local-kafka.sh up|down|status|install|restart-broker [--brokers 1|3]
#   (--brokers 3: a local three-node cluster, scripts/local-kafka-cluster.sh)
#
# Ports: RS_KAFKA_PORT (9092), RS_CONTROLLER_PORT (9093), RS_REGISTRY_PORT (8081),
# RS_REGISTRY_MGMT_PORT (registry port + 1: its health/metrics interface).
# Heaps: RS_KAFKA_HEAP (-Xmx1g -Xms256m), RS_REGISTRY_HEAP (-Xmx512m).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="$ROOT/.local"
LIBS="$LOCAL/kafka-libs"
APIC="$LOCAL/apicurio"
STATE="${RS_KAFKA_STATE_DIR:-$LOCAL/kafka}"
KAFKA_PORT="${RS_KAFKA_PORT:-9092}"
CONTROLLER_PORT="${RS_CONTROLLER_PORT:-9093}"
# A second listener with SASL (PLAIN, SCRAM-SHA-256/512) for the SASL tests;
# user rstest / password rstest-secret, loopback only.
SASL_PORT="${RS_KAFKA_SASL_PORT:-$((KAFKA_PORT + 2))}"
SASL_USER=rstest
SASL_PASSWORD=rstest-secret
# And a TLS listener (certificate of a throw-away local CA in .local/kafka/tls).
TLS_PORT="${RS_KAFKA_TLS_PORT:-$((KAFKA_PORT + 3))}"
REGISTRY_PORT="${RS_REGISTRY_PORT:-8081}"
REGISTRY_MGMT_PORT="${RS_REGISTRY_MGMT_PORT:-$((REGISTRY_PORT + 1))}"
KAFKA_HEAP="${RS_KAFKA_HEAP:--Xmx1g -Xms256m}"
REGISTRY_HEAP="${RS_REGISTRY_HEAP:--Xmx512m -Xms128m}"
# Largest record the broker accepts (bytes). Topics, producers and consumers
# are configured from the same figure (streams/limits.ts reads it too).
MAX_MESSAGE_BYTES="${RS_MAX_MESSAGE_BYTES:-67108864}"
POM="$ROOT/infra/kafka/pom.xml"

log() { printf '[kafka] %s\n' "$*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# One install at a time: `image build-compose` (in the background in
# scripts/test.sh) and `kafka up` may both ask on a fresh clone.
install_artifacts() {
  mkdir -p "$LOCAL"
  ( flock 9; install_artifacts_unlocked ) 9>"$LOCAL/.install.lock"
}

install_artifacts_unlocked() {
  local stamp
  stamp="$(sha256sum "$POM" | cut -c1-16)"
  if [[ -f "$LIBS/.stamp" && "$(cat "$LIBS/.stamp")" == "$stamp" && -f "$APIC/quarkus-run.jar" ]]; then
    return 0
  fi
  command -v mvn >/dev/null || { log "Maven (mvn) is required to fetch Kafka's jars"; exit 1; }
  command -v java >/dev/null || { log "Java 17+ is required to run Kafka"; exit 1; }
  log "fetching Apache Kafka and Apicurio Registry from Maven Central (first run only)…"
  rm -rf "$LIBS" "$APIC"
  local dep=org.apache.maven.plugins:maven-dependency-plugin:3.8.1 ver
  mvn -q -B -f "$POM" "$dep:copy-dependencies" -DoutputDirectory="$LIBS" -DincludeScope=runtime >&2
  ver="$(sed -n 's#.*<apicurio.version>\(.*\)</apicurio.version>.*#\1#p' "$POM")"
  # Copy the distribution and unpack it with tar: the dependency plugin's own
  # unpack mishandles this archive's pax headers.
  mvn -q -B -f "$POM" "$dep:copy" -Dartifact="io.apicurio:apicurio-registry-app:${ver}:tar.gz:all" \
    -DoutputDirectory="$LOCAL/downloads" >&2
  mkdir -p "$APIC"
  tar xzf "$LOCAL/downloads/apicurio-registry-app-${ver}-all.tar.gz" -C "$APIC"
  [[ -f "$APIC/quarkus-run.jar" ]] || { log "the Apicurio distribution did not unpack as expected (no quarkus-run.jar in $APIC)"; exit 1; }
  echo "$stamp" > "$LIBS/.stamp"
}

# A local CA and a server certificate for 127.0.0.1, PEM, made once per data dir.
ensure_tls_material() {
  local d="$STATE/tls"
  [[ -f "$d/server.pem" ]] && return 0
  command -v openssl >/dev/null || { log "openssl not found: the TLS listener needs it"; exit 1; }
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=rollout-stream local CA" \
    -keyout "$d/ca.key" -out "$d/ca.pem" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$d/san.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 3650 \
    -extfile "$d/san.ext" -out "$d/server.crt" >/dev/null 2>&1
  # Kafka's PEM keystore: unencrypted PKCS#8 key followed by the certificate chain.
  openssl pkcs8 -topk8 -nocrypt -in "$d/server.key" -out "$d/server.pk8"
  cat "$d/server.pk8" "$d/server.crt" "$d/ca.pem" > "$d/server.pem"
}

write_config() {
  mkdir -p "$STATE/data"
  ensure_tls_material
  cat > "$STATE/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:${CONTROLLER_PORT}
listeners=PLAINTEXT://127.0.0.1:${KAFKA_PORT},CONTROLLER://127.0.0.1:${CONTROLLER_PORT},SASL_PLAINTEXT://127.0.0.1:${SASL_PORT},SSL://127.0.0.1:${TLS_PORT}
advertised.listeners=PLAINTEXT://127.0.0.1:${KAFKA_PORT},CONTROLLER://127.0.0.1:${CONTROLLER_PORT},SASL_PLAINTEXT://127.0.0.1:${SASL_PORT},SSL://127.0.0.1:${TLS_PORT}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL
listener.name.ssl.ssl.keystore.type=PEM
listener.name.ssl.ssl.keystore.location=${STATE}/tls/server.pem
listener.name.ssl.ssl.client.auth=none
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_${SASL_USER}="${SASL_PASSWORD}";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
log.dirs=${STATE}/data
num.partitions=4
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=8
group.initial.rebalance.delay.ms=0
message.max.bytes=${MAX_MESSAGE_BYTES}
replica.fetch.max.bytes=${MAX_MESSAGE_BYTES}
socket.request.max.bytes=$((MAX_MESSAGE_BYTES * 2))
log.retention.hours=168
log.segment.bytes=268435456
transaction.max.timeout.ms=900000
EOF
}

java_cp() { echo "$LIBS/*"; }

# Apicurio Registry 3.x is built for Java 21+; the broker runs on the
# machine's Java 17. Use RS_REGISTRY_JAVA, else the newest JDK found.
registry_java() {
  if [[ -n "${RS_REGISTRY_JAVA:-}" ]]; then echo "$RS_REGISTRY_JAVA"; return; fi
  local j
  for j in /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/temurin-21-jdk-amd64 /usr/lib/jvm/java-21-openjdk-amd64; do
    [[ -x "$j/bin/java" ]] && { echo "$j/bin/java"; return; }
  done
  echo java
}

kafka_java() {
  # shellcheck disable=SC2086
  java $KAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$(java_cp)" "$@"
}

broker_up() {
  if port_open "$KAFKA_PORT"; then
    if pid_alive "$STATE/broker.pid"; then log "broker already up on 127.0.0.1:$KAFKA_PORT"; return 0; fi
    log "port $KAFKA_PORT is taken by another process; set RS_KAFKA_PORT or KAFKA_BROKERS"; exit 1
  fi
  write_config
  if [[ ! -f "$STATE/data/meta.properties" ]]; then
    kafka_java kafka.tools.StorageTool format --standalone \
      --cluster-id "$(kafka_java kafka.tools.StorageTool random-uuid)" \
      --add-scram "SCRAM-SHA-256=[name=${SASL_USER},password=${SASL_PASSWORD}]" \
      --add-scram "SCRAM-SHA-512=[name=${SASL_USER},password=${SASL_PASSWORD}]" \
      --config "$STATE/server.properties" > "$STATE/format.log" 2>&1 \
      || { cat "$STATE/format.log" >&2; exit 1; }
    touch "$STATE/.scram-users"
  fi
  local t0=$SECONDS
  nohup bash -c "exec java $KAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
      -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp '$(java_cp)' kafka.Kafka '$STATE/server.properties'" \
      > "$STATE/broker.log" 2>&1 < /dev/null &
  echo $! > "$STATE/broker.pid"
  for _ in $(seq 1 120); do
    if port_open "$KAFKA_PORT"; then
      log "broker up on 127.0.0.1:$KAFKA_PORT (SASL :$SASL_PORT, TLS :$TLS_PORT) ($((SECONDS - t0)) s)"
      ensure_scram_users
      return 0
    fi
    pid_alive "$STATE/broker.pid" || { tail -30 "$STATE/broker.log" >&2; log "broker exited during start-up"; exit 1; }
    sleep 0.5
  done
  log "broker did not answer within 60 s; see $STATE/broker.log"; exit 1
}

# Storage formatted before the SASL listener existed has no SCRAM users yet.
ensure_scram_users() {
  [[ -f "$STATE/.scram-users" ]] && return 0
  local m
  for m in SCRAM-SHA-256 SCRAM-SHA-512; do  # one mechanism per request
    kafka_java kafka.admin.ConfigCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" --alter \
      --add-config "${m}=[password=${SASL_PASSWORD}]" --entity-type users --entity-name "$SASL_USER" \
      >> "$STATE/scram.log" 2>&1 || { log "could not add the SCRAM test user (see $STATE/scram.log)"; return 0; }
  done
  touch "$STATE/.scram-users"
}

registry_up() {
  if port_open "$REGISTRY_PORT"; then
    if pid_alive "$STATE/registry.pid"; then log "registry already up on http://127.0.0.1:$REGISTRY_PORT"; return 0; fi
    log "port $REGISTRY_PORT is taken by another process; set RS_REGISTRY_PORT or SCHEMA_REGISTRY_URL"; exit 1
  fi
  local t0=$SECONDS jv
  jv="$("$(registry_java)" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
  if [[ -z "$jv" || "$jv" -lt 21 ]]; then
    log "the schema registry (Apicurio 3.3) needs Java 21+, found '${jv:-none}' at $(registry_java); set RS_REGISTRY_JAVA to a Java 21+ binary"
    exit 1
  fi
  # shellcheck disable=SC2086
  nohup "$(registry_java)" $REGISTRY_HEAP -XX:+UseSerialGC \
      -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$REGISTRY_PORT" \
      -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$REGISTRY_MGMT_PORT" -Dquarkus.otel.sdk.disabled=true \
      -Dapicurio.storage.kind=kafkasql \
      -Dapicurio.kafkasql.bootstrap.servers="127.0.0.1:$KAFKA_PORT" \
      -Dapicurio.kafkasql.topic=_schemas \
      -Dapicurio.kafkasql.snapshots.topic=_schemas_snapshots \
      -Dapicurio.rest.deletion.artifact.enabled=true \
      -Dapicurio.rest.deletion.artifact-version.enabled=true \
      -Dquarkus.log.level=WARN \
      -jar "$APIC/quarkus-run.jar" > "$STATE/registry.log" 2>&1 < /dev/null &
  echo $! > "$STATE/registry.pid"
  for _ in $(seq 1 240); do
    if curl -fs "http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7/subjects" >/dev/null 2>&1; then
      log "registry up on http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7 ($((SECONDS - t0)) s)"; return 0
    fi
    pid_alive "$STATE/registry.pid" || { tail -30 "$STATE/registry.log" >&2; log "registry exited during start-up"; exit 1; }
    sleep 0.5
  done
  log "registry did not answer within 120 s; see $STATE/registry.log"; exit 1
}

stop_pid() {
  local name="$1" file="$2" pid
  pid_alive "$file" || { rm -f "$file"; return 0; }
  pid="$(cat "$file")"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then log "$name did not stop in 30 s; killing"; kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$file"
  log "$name stopped"
}

status() {
  local b="127.0.0.1:$KAFKA_PORT" r="http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"
  if port_open "$KAFKA_PORT"; then echo "kafka     $b  up"; else echo "kafka     $b  down"; fi
  if curl -fs "$r/subjects" >/dev/null 2>&1; then echo "registry  $r  up"; else echo "registry  $r  down"; fi
}

external_status() {
  local b ok=1 host port
  IFS=',' read -ra list <<< "$KAFKA_BROKERS"
  for b in "${list[@]}"; do
    host="${b%:*}"; port="${b##*:}"
    if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then echo "kafka     $b  up (external)"; else echo "kafka     $b  down (external)"; ok=0; fi
  done
  local r="${SCHEMA_REGISTRY_URL:-http://127.0.0.1:8081/apis/ccompat/v7}"
  if curl -fs "$r/subjects" >/dev/null 2>&1; then echo "registry  $r  up"; else echo "registry  $r  down"; ok=0; fi
  [[ $ok == 1 ]]
}

# `--brokers N` (anywhere on the line; default RS_BROKERS, else 1): 1 is the
# single broker above, 3 the local cluster of scripts/local-kafka-cluster.sh.
BROKERS="${RS_BROKERS:-1}"
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --brokers) BROKERS="${2:-}"; shift 2 || { log "--brokers needs a number (1 or 3)"; exit 2; } ;;
    --brokers=*) BROKERS="${1#--brokers=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- "${args[@]+"${args[@]}"}"
case "$BROKERS" in
  1) ;;
  3) if [[ -n "${KAFKA_BROKERS:-}" && "${RS_LOCAL_BROKER:-}" != 1 && "${1:-}" =~ ^(up|down)$ ]]; then
       log "KAFKA_BROKERS is set ($KAFKA_BROKERS): using it, nothing local is started or stopped"; exit 0
     fi
     case "${1:-}" in -h|--help|help|"") ;; *)
       # shellcheck source=scripts/local-kafka-cluster.sh
       source "$ROOT/scripts/local-kafka-cluster.sh"; cluster_main "$@"; exit $? ;;
     esac ;;
  *) log "--brokers $BROKERS: only 1 (one broker) and 3 (a local cluster) are supported"; exit 2 ;;
esac

# RS_LOCAL_BROKER=1: KAFKA_BROKERS points at this script's own broker (set by scripts/test.sh).
if [[ -n "${KAFKA_BROKERS:-}" && "${RS_LOCAL_BROKER:-}" != 1 ]]; then
  case "${1:-}" in
    up|down) log "KAFKA_BROKERS is set ($KAFKA_BROKERS): using it, nothing local is started or stopped"; external_status || true; exit 0 ;;
    status) external_status; exit $? ;;
  esac
fi

case "${1:-}" in
  install) install_artifacts ;;
  up) install_artifacts; broker_up; registry_up ;;
  down) stop_pid registry "$STATE/registry.pid"; stop_pid broker "$STATE/broker.pid" ;;
  restart-broker) stop_pid broker "$STATE/broker.pid"; broker_up ;;
  stop-broker) stop_pid broker "$STATE/broker.pid" ;;
  start-broker) broker_up ;;
  wipe) stop_pid registry "$STATE/registry.pid"; stop_pid broker "$STATE/broker.pid"; rm -rf "$STATE"; log "data removed" ;;
  status) status ;;
  -h|--help|help|"")
    cat <<USAGE
usage: ./rollout-stream kafka <up|down|status> [--brokers 1|3]

  up       fetch Kafka ${KAFKA_VERSION_HINT:-4.x} and Apicurio Registry from Maven Central (first run),
           start the broker (KRaft, 127.0.0.1:$KAFKA_PORT) and the registry
           (http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7); harmless when already up
  down     stop both cleanly (data is kept in .local/kafka)
  status   print the bootstrap servers and registry URL and whether each answers
  wipe     stop both and delete the local data
  restart-broker | stop-broker | start-broker   (used by failure tests)

  --brokers 3 (or RS_BROKERS=3): the same commands for a local cluster of three
           KRaft nodes (broker + controller each) on 127.0.0.1:19092-19094
           (controllers :19095-19097) with its own registry on
           http://127.0.0.1:18091/apis/ccompat/v7 and data in .local/kafka-cluster;
           internal topics replicated 3 times, min.insync.replicas 2. It runs
           beside the single broker. Extra commands: bootstrap, registry-url,
           controller-leader, kill-broker N (SIGKILL), stop-broker N,
           start-broker N, stop-registry, start-registry.

With KAFKA_BROKERS (and SCHEMA_REGISTRY_URL) set, nothing local is started:
up/down say so and status probes those instead.
Example: ./rollout-stream kafka up && ./rollout-stream kafka status
USAGE
    ;;
  *) echo "unknown command '$1'; see ./rollout-stream kafka --help" >&2; exit 2 ;;
esac
