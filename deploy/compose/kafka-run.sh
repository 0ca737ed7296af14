#!/bin/bash
# Entrypoint of the local stand-in for docker.io/apache/kafka
# (kafka.Containerfile), configured the same way: every KAFKA_<NAME>
# variable becomes the broker property <name> (lower case; "_" → ".",
# "__" → "_", "___" → "-"), except the JVM's own KAFKA_HEAP_OPTS and
# KAFKA_OPTS. The storage is formatted on first start with CLUSTER_ID
# (the public image's default when unset). Data: log.dirs, default
# /var/lib/kafka/data.
set -euo pipefail
KAFKA_HOME=/opt/kafka
props="$KAFKA_HOME/config/server.properties"
mkdir -p "$KAFKA_HOME/config"
: >"$props"
for name in $(compgen -e); do
  case "$name" in
    KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_GC_LOG_OPTS | KAFKA_LOG4J_OPTS | KAFKA_JMX_OPTS | KAFKA_HOME) continue ;;
    KAFKA_*) ;;
    *) continue ;;
  esac
  key="${name#KAFKA_}"
  key="${key,,}"
  key="${key//___/-}"
  key="${key//__/@}"
  key="${key//_/.}"
  key="${key//@/_}"
  printf '%s=%s\n' "$key" "${!name}" >>"$props"
done
grep -q '^log\.dirs=' "$props" || printf 'log.dirs=/var/lib/kafka/data\n' >>"$props"
logdir="$(sed -n 's/^log\.dirs=\([^,]*\).*/\1/p' "$props")"
mkdir -p "$logdir"
cp_libs="$KAFKA_HOME/libs/*"
# shellcheck disable=SC2086
if [[ ! -f "$logdir/meta.properties" ]]; then
  java -Xmx256m -cp "$cp_libs" kafka.tools.StorageTool format --ignore-formatted \
    --cluster-id "${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" --config "$props"
fi
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xmx1g -Xms256m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn ${KAFKA_OPTS:-} -cp "$cp_libs" kafka.Kafka "$props"
