# shellcheck shell=bash
# A local three-node Apache Kafka cluster (KRaft; each node is broker and
# controller) and its own schema registry, for the replicated-cluster tests
# (SPEC §8.1). Sourced by scripts/local-kafka.sh for `--brokers 3` (or
# RS_BROKERS=3); it uses that script's helpers (install_artifacts, port_open,
# pid_alive, stop_pid, registry_java, log). Same Maven artifacts as the single
# broker; its own data in .local/kafka-cluster; ports that leave the single
# broker (9092-9095) and its registry (8081) alone, so both can run at once.
#
# Ports: node i (1-3) serves clients on RS_CLUSTER_PORT+i-1 (19092-19094) and
# its controller on RS_CLUSTER_CONTROLLER_PORT+i-1 (19095-19097); the registry
# on RS_CLUSTER_REGISTRY_PORT (18091, management 18092).
# Heaps: RS_CLUSTER_KAFKA_HEAP (-Xmx512m -Xms128m, each node),
# RS_CLUSTER_REGISTRY_HEAP (-Xmx384m). Internal topics: replication 3,
# min.insync.replicas 2, as every pipeline topic on a cluster (README "Production").

CSTATE="${RS_KAFKA_CLUSTER_STATE_DIR:-$LOCAL/kafka-cluster}"
CPORT="${RS_CLUSTER_PORT:-19092}"
CCTRL_PORT="${RS_CLUSTER_CONTROLLER_PORT:-19095}"
CREG_PORT="${RS_CLUSTER_REGISTRY_PORT:-18091}"
CREG_MGMT_PORT="${RS_CLUSTER_REGISTRY_MGMT_PORT:-$((CREG_PORT + 1))}"
CKAFKA_HEAP="${RS_CLUSTER_KAFKA_HEAP:--Xmx512m -Xms128m}"
CREG_HEAP="${RS_CLUSTER_REGISTRY_HEAP:--Xmx384m -Xms96m}"
NODES=(1 2 3)

node_port() { echo $((CPORT + $1 - 1)); }
node_ctrl_port() { echo $((CCTRL_PORT + $1 - 1)); }
node_dir() { echo "$CSTATE/node-$1"; }
cluster_bootstrap() {
  local i out=()
  for i in "${NODES[@]}"; do out+=("127.0.0.1:$(node_port "$i")"); done
  (IFS=,; echo "${out[*]}")
}
cluster_registry_url() { echo "http://127.0.0.1:$CREG_PORT/apis/ccompat/v7"; }

cluster_write_config() {
  local i="$1" d voters="" j
  d="$(node_dir "$i")"
  mkdir -p "$d/data"
  for j in "${NODES[@]}"; do voters+="${voters:+,}$j@127.0.0.1:$(node_ctrl_port "$j")"; done
  cat > "$d/server.properties" <<EOF
process.roles=broker,controller
node.id=${i}
controller.quorum.voters=${voters}
listeners=PLAINTEXT://127.0.0.1:$(node_port "$i"),CONTROLLER://127.0.0.1:$(node_ctrl_port "$i")
advertised.listeners=PLAINTEXT://127.0.0.1:$(node_port "$i")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=${d}/data
num.partitions=4
default.replication.factor=3
min.insync.replicas=2
auto.create.topics.enable=false
offsets.topic.replication.factor=3
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=8
group.initial.rebalance.delay.ms=0
unclean.leader.election.enable=false
message.max.bytes=${MAX_MESSAGE_BYTES}
replica.fetch.max.bytes=${MAX_MESSAGE_BYTES}
socket.request.max.bytes=$((MAX_MESSAGE_BYTES * 2))
log.retention.hours=168
log.segment.bytes=268435456
transaction.max.timeout.ms=900000
num.network.threads=2
num.io.threads=4
num.replica.fetchers=1
background.threads=4
EOF
}

cluster_java() {
  # shellcheck disable=SC2086
  java $CKAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$(java_cp)" "$@"
}

# Formats every node's storage with one cluster id (once; data is kept across down/up).
cluster_format() {
  local i id=""
  for i in "${NODES[@]}"; do [[ -f "$(node_dir "$i")/data/meta.properties" ]] || id=new; done
  [[ -z "$id" ]] && return 0
  rm -rf "$CSTATE"/node-*/data
  id="$(cluster_java kafka.tools.StorageTool random-uuid)"
  for i in "${NODES[@]}"; do
    cluster_write_config "$i"
    cluster_java kafka.tools.StorageTool format --cluster-id "$id" \
      --config "$(node_dir "$i")/server.properties" > "$(node_dir "$i")/format.log" 2>&1 \
      || { cat "$(node_dir "$i")/format.log" >&2; exit 1; }
  done
}

cluster_node_start() {
  local i="$1" d port
  d="$(node_dir "$i")"; port="$(node_port "$i")"
  if pid_alive "$d/broker.pid"; then return 0; fi
  if port_open "$port"; then log "port $port is taken by another process; set RS_CLUSTER_PORT"; exit 1; fi
  cluster_write_config "$i"
  nohup bash -c "exec java $CKAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
      -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp '$(java_cp)' kafka.Kafka '$d/server.properties'" \
      >> "$d/broker.log" 2>&1 < /dev/null &
  echo $! > "$d/broker.pid"
}

cluster_node_wait() {
  local i="$1" d port
  d="$(node_dir "$i")"; port="$(node_port "$i")"
  for _ in $(seq 1 240); do
    port_open "$port" && return 0
    pid_alive "$d/broker.pid" || { tail -30 "$d/broker.log" >&2; log "node $i exited during start-up"; exit 1; }
    sleep 0.5
  done
  log "node $i did not answer within 120 s; see $d/broker.log"; exit 1
}

cluster_brokers_up() {
  local i t0=$SECONDS
  cluster_format
  # All at once: no node answers clients before the controller quorum has a leader.
  for i in "${NODES[@]}"; do cluster_node_start "$i"; done
  for i in "${NODES[@]}"; do cluster_node_wait "$i"; done
  log "cluster up on $(cluster_bootstrap) ($((SECONDS - t0)) s)"
}

# The registry keeps its schemas in a topic of the cluster (KafkaSQL), so a
# restarted registry serves the same ids; that topic takes the nodes' defaults
# (default.replication.factor 3, min.insync.replicas 2), replicated like the rest.
cluster_registry_up() {
  local url t0=$SECONDS
  url="$(cluster_registry_url)"
  if pid_alive "$CSTATE/registry.pid"; then log "cluster registry already up on $url"; return 0; fi
  if port_open "$CREG_PORT"; then log "port $CREG_PORT is taken by another process; set RS_CLUSTER_REGISTRY_PORT"; exit 1; fi
  # shellcheck disable=SC2086
  nohup "$(registry_java)" $CREG_HEAP -XX:+UseSerialGC \
      -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$CREG_PORT" \
      -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$CREG_MGMT_PORT" -Dquarkus.otel.sdk.disabled=true \
      -Dapicurio.storage.kind=kafkasql \
      -Dapicurio.kafkasql.bootstrap.servers="$(cluster_bootstrap)" \
      -Dapicurio.kafkasql.topic=_schemas \
      -Dapicurio.kafkasql.snapshots.topic=_schemas_snapshots \
      -Dapicurio.kafkasql.producer.acks=all \
      -Dapicurio.rest.deletion.artifact.enabled=true \
      -Dapicurio.rest.deletion.artifact-version.enabled=true \
      -Dquarkus.log.level=WARN \
      -jar "$APIC/quarkus-run.jar" >> "$CSTATE/registry.log" 2>&1 < /dev/null &
  echo $! > "$CSTATE/registry.pid"
  for _ in $(seq 1 240); do
    if curl -fs "$url/subjects" >/dev/null 2>&1; then log "cluster registry up on $url ($((SECONDS - t0)) s)"; return 0; fi
    pid_alive "$CSTATE/registry.pid" || { tail -30 "$CSTATE/registry.log" >&2; log "cluster registry exited during start-up"; exit 1; }
    sleep 0.5
  done
  log "cluster registry did not answer within 120 s; see $CSTATE/registry.log"; exit 1
}

cluster_status() {
  local i url n=0
  for i in "${NODES[@]}"; do
    if port_open "$(node_port "$i")"; then echo "kafka     127.0.0.1:$(node_port "$i")  up    (node $i)"; n=$((n + 1))
    else echo "kafka     127.0.0.1:$(node_port "$i")  down  (node $i)"; fi
  done
  url="$(cluster_registry_url)"
  if curl -fs "$url/subjects" >/dev/null 2>&1; then echo "registry  $url  up"; else echo "registry  $url  down"; fi
  echo "bootstrap $(cluster_bootstrap)  ($n of ${#NODES[@]} nodes up)"
}

# The node id of the active controller (the quorum leader), from the quorum's own report.
cluster_controller_leader() {
  local b i
  for i in "${NODES[@]}"; do port_open "$(node_port "$i")" && { b="127.0.0.1:$(node_port "$i")"; break; }; done
  [[ -n "${b:-}" ]] || { log "no node of the cluster answers"; exit 1; }
  # The tool needs little memory; keep its JVM small and quick.
  java -Xmx128m -XX:TieredStopAtLevel=1 -Dorg.slf4j.simpleLogger.defaultLogLevel=error -cp "$(java_cp)" \
    org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "$b" describe --status 2>/dev/null \
    | sed -n 's/^LeaderId:[[:space:]]*\([0-9]*\).*/\1/p'
}

node_arg() {
  [[ "${1:-}" =~ ^[1-3]$ ]] || { log "which node? give 1, 2 or 3 (e.g. kafka kill-broker 2 --brokers 3)"; exit 2; }
  echo "$1"
}

cluster_main() {
  local cmd="${1:-}" i
  shift || true
  case "$cmd" in
    install) install_artifacts ;;
    up) install_artifacts; cluster_brokers_up; cluster_registry_up ;;
    down)
      stop_pid "cluster registry" "$CSTATE/registry.pid"
      for i in "${NODES[@]}"; do stop_pid "node $i" "$(node_dir "$i")/broker.pid" & done
      wait ;;
    status) cluster_status ;;
    bootstrap) cluster_bootstrap ;;
    registry-url) cluster_registry_url ;;
    controller-leader) cluster_controller_leader ;;
    kill-broker)  # SIGKILL, no clean shutdown (failure tests)
      i="$(node_arg "${1:-}")"
      if pid_alive "$(node_dir "$i")/broker.pid"; then
        local pid; pid="$(cat "$(node_dir "$i")/broker.pid")"
        kill -KILL "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        log "node $i killed"
      fi
      rm -f "$(node_dir "$i")/broker.pid" ;;
    stop-broker) i="$(node_arg "${1:-}")"; stop_pid "node $i" "$(node_dir "$i")/broker.pid" ;;
    start-broker) i="$(node_arg "${1:-}")"; cluster_node_start "$i"; cluster_node_wait "$i"; log "node $i up on 127.0.0.1:$(node_port "$i")" ;;
    restart-broker) i="$(node_arg "${1:-1}")"; stop_pid "node $i" "$(node_dir "$i")/broker.pid"; cluster_node_start "$i"; cluster_node_wait "$i" ;;
    stop-registry) stop_pid "cluster registry" "$CSTATE/registry.pid" ;;
    start-registry) cluster_registry_up ;;
    wipe)
      stop_pid "cluster registry" "$CSTATE/registry.pid"
      for i in "${NODES[@]}"; do stop_pid "node $i" "$(node_dir "$i")/broker.pid"; done
      rm -rf "$CSTATE"; log "cluster data removed" ;;
    *) echo "unknown cluster command '$cmd'; see ./rollout-stream kafka --help" >&2; exit 2 ;;
  esac
}
