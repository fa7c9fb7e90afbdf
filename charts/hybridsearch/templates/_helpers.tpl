{{/* Names and labels. */}}
{{- define "hybridsearch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hybridsearch.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The name of one component's objects, e.g. release-hybridsearch-bm25. Args: root, name. */}}
{{- define "hybridsearch.componentName" -}}
{{- printf "%s-%s" (include "hybridsearch.fullname" .root | trunc 50 | trimSuffix "-") .name }}
{{- end }}

{{- define "hybridsearch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hybridsearch.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end }}

{{- define "hybridsearch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "hybridsearch.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: hybridsearch
{{- end }}

{{- define "hybridsearch.chartLabels" -}}
{{ include "hybridsearch.labels" (dict "root" . "name" "chart") }}
{{- end }}

{{- define "hybridsearch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hybridsearch.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hybridsearch.image" -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion }}
{{- printf "%s:%s" .image.repository $tag }}
{{- end }}

{{/*
API versions: current ones where the server has them, the 1.20-era ones otherwise. A live server
lists "group/version/Kind"; offline (helm template) only group versions are known, whatever
--kube-version says, so the kube version decides there (policy/v1 from 1.21, autoscaling/v2 from 1.23).
*/}}
{{- define "hybridsearch.pdbApiVersion" -}}
{{- $v1 := or (.Capabilities.APIVersions.Has "policy/v1/PodDisruptionBudget") (and (.Capabilities.APIVersions.Has "policy/v1") (semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version)) }}
{{- if $v1 -}}policy/v1{{- else -}}policy/v1beta1{{- end }}
{{- end }}

{{- define "hybridsearch.hpaApiVersion" -}}
{{- $v2 := or (.Capabilities.APIVersions.Has "autoscaling/v2/HorizontalPodAutoscaler") (and (.Capabilities.APIVersions.Has "autoscaling/v2") (semverCompare ">=1.23-0" .Capabilities.KubeVersion.Version)) }}
{{- if $v2 -}}autoscaling/v2{{- else -}}autoscaling/v2beta2{{- end }}
{{- end }}

{{/* Native gRPC probes: beta and on by default from 1.24, GA in 1.27. */}}
{{- define "hybridsearch.grpcProbes" -}}
{{- $mode := .Values.probes.mode }}
{{- if eq $mode "grpc" }}true
{{- else if and (eq $mode "auto") (semverCompare ">=1.24-0" .Capabilities.KubeVersion.Version) }}true
{{- end }}
{{- end }}

{{/*
A probe's action (the handler only). Args: root, port, exec (command list for old servers), grpc
(bool: the container answers grpc.health.v1 on port).
*/}}
{{- define "hybridsearch.probeAction" -}}
{{- if and .grpc (include "hybridsearch.grpcProbes" .root) }}
grpc:
  port: {{ .port }}
{{- else }}
exec:
  command: {{- toYaml .exec | nindent 4 }}
{{- end }}
{{- end }}

{{/* startup/readiness/liveness probes. Args: root, port, exec, grpc. */}}
{{- define "hybridsearch.probes" -}}
{{- $action := include "hybridsearch.probeAction" . | trim }}
{{- range $kind := list "startup" "readiness" "liveness" }}
{{ $kind }}Probe:
  {{- $action | nindent 2 }}
  {{- toYaml (index $.root.Values.probes $kind) | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The Python services, one component each: services/runtime/services.py's table (tests/charts checks the two
agree). A space-separated string: `splitList " " (include "hybridsearch.pythonServices" .)`.
*/}}
{{- define "hybridsearch.pythonServices" -}}
gateway bm25 vector expansion fusion
{{- end }}

{{/*
An environment value as a string: helm reads every YAML number as float64, which prints large
integers in exponent form (604800 -> 6.048e+05), so whole numbers are printed as integers; lists
and maps become JSON, which pydantic-settings parses for list and dict settings.
*/}}
{{- define "hybridsearch.envValue" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) }}{{ int64 . }}
{{- else if or (kindIs "slice" .) (kindIs "map" .) }}{{ toJson . }}
{{- else }}{{ . }}
{{- end }}
{{- end }}

{{/*
Environment of a Python service as a dict (name -> value); later keys win, and the chart's own
addresses come before values.config, values.env and the component's env.
Args: root, name, component.
*/}}
{{- define "hybridsearch.envDict" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $env := dict }}
{{- $_ := set $env "HYBRIDSEARCH_DATA_DIR" "/data" }}
{{- $_ = set $env "HYBRIDSEARCH_LOG_LEVEL" "INFO" }}
{{- /* Listen on every interface; dial the other services by their Service names. */}}
{{- $_ = set $env "HYBRIDSEARCH_ENDPOINTS__HOST" "0.0.0.0" }}
{{- range $svc := splitList " " (include "hybridsearch.pythonServices" $root) }}
{{- $port := (index $v $svc).port }}
{{- $_ = set $env (printf "HYBRIDSEARCH_ENDPOINTS__%s_PORT" (upper $svc)) (include "hybridsearch.envValue" $port) }}
{{- $_ = set $env (printf "HYBRIDSEARCH_ENDPOINTS__%s_ADDR" (upper $svc)) (printf "%s:%s" (include "hybridsearch.componentName" (dict "root" $root "name" $svc)) (include "hybridsearch.envValue" $port)) }}
{{- end }}
{{- $_ = set $env "HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY" (include "hybridsearch.envValue" $v.topology.inGateway) }}
{{- if $v.externalOpenSearch.url }}
{{- $_ = set $env "HYBRIDSEARCH_BM25__ENGINE" "opensearch" }}
{{- $_ = set $env "HYBRIDSEARCH_BM25__OPENSEARCH_URL" $v.externalOpenSearch.url }}
{{- else }}
{{- $_ = set $env "HYBRIDSEARCH_BM25__ENGINE" "embedded" }}
{{- end }}
{{- if $v.externalQdrant.url }}
{{- $_ = set $env "HYBRIDSEARCH_VECTOR__ENGINE" "qdrant" }}
{{- $_ = set $env "HYBRIDSEARCH_VECTOR__QDRANT_URL" $v.externalQdrant.url }}
{{- else }}
{{- $_ = set $env "HYBRIDSEARCH_VECTOR__ENGINE" "embedded" }}
{{- end }}
{{- if $v.externalRedis.url }}
{{- $_ = set $env "HYBRIDSEARCH_REDIS__STATE_URL" $v.externalRedis.url }}
{{- /* Empty cacheUrl: the caches share the state Redis (bounded by their TTLs only). */}}
{{- $_ = set $env "HYBRIDSEARCH_REDIS__CACHE_URL" ($v.externalRedis.cacheUrl | default "") }}
{{- else }}
{{- /* No Redis: query vectors are kept in each vector pod's memory only (not looked for in a Redis that is not there). */}}
{{- $_ = set $env "HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS" "false" }}
{{- end }}
{{- /* No llama.cpp server inside a pod: an LLM is an external endpoint (config.expansion.llm_url). */}}
{{- $_ = set $env "HYBRIDSEARCH_EXPANSION__LLM_SERVE" "" }}
{{- $_ = set $env "HYBRIDSEARCH_RERANK__TRITON_URL" (printf "%s:%s" (include "hybridsearch.componentName" (dict "root" $root "name" "triton")) (include "hybridsearch.envValue" $v.triton.ports.grpc)) }}
{{- $_ = set $env "HYBRIDSEARCH_RERANK__MODEL_NAME" $v.triton.modelName }}
{{- $_ = set $env "HYBRIDSEARCH_METRICS_PORT" (ternary (include "hybridsearch.envValue" $v.metrics.port) "0" $v.metrics.enabled) }}
{{- if $v.otel.endpoint }}
{{- $_ = set $env "OTEL_EXPORTER_OTLP_ENDPOINT" $v.otel.endpoint }}
{{- $_ = set $env "OTEL_EXPORTER_OTLP_INSECURE" (toString $v.otel.insecure) }}
{{- $_ = set $env "OTEL_TRACES_SAMPLER" $v.otel.sampler }}
{{- $_ = set $env "OTEL_TRACES_SAMPLER_ARG" (toString $v.otel.samplerArg) }}
{{- end }}
{{- $_ = set $env "OTEL_SERVICE_NAME" (printf "hybridsearch-%s" .name) }}
{{- $attrs := list (printf "service.namespace=%s" $root.Release.Namespace) }}
{{- range $k, $val := $v.otel.resourceAttributes }}
{{- $attrs = append $attrs (printf "%s=%s" $k (include "hybridsearch.envValue" $val)) }}
{{- end }}
{{- $_ = set $env "OTEL_RESOURCE_ATTRIBUTES" (join "," $attrs) }}
{{- range $key, $val := include "hybridsearch.accessEnv" . | fromYaml }}{{- $_ = set $env $key $val }}{{- end }}
{{- with $v.collections }}
{{- $_ = set $env "HYBRIDSEARCH_COLLECTIONS" (toJson .) }}
{{- end }}
{{- /* values.config: sections become HYBRIDSEARCH_<SECTION>__<NAME>, top-level keys HYBRIDSEARCH_<NAME>. */}}
{{- range $key, $val := $v.config }}
{{- if kindIs "map" $val }}
{{- range $sub, $subVal := $val }}
{{- $_ = set $env (printf "HYBRIDSEARCH_%s__%s" (upper $key) (upper $sub)) (include "hybridsearch.envValue" $subVal) }}
{{- end }}
{{- else }}
{{- $_ = set $env (printf "HYBRIDSEARCH_%s" (upper $key)) (include "hybridsearch.envValue" $val) }}
{{- end }}
{{- end }}
{{- range $key, $val := $v.env }}
{{- $_ = set $env $key (include "hybridsearch.envValue" $val) }}
{{- end }}
{{- /* A service inside the gateway (topology.inGateway) runs in the gateway's pods with its own env, the gateway's over it. */}}
{{- if eq .name "gateway" }}
{{- range $inside := $v.topology.inGateway }}
{{- range $key, $val := (index $v $inside).env }}
{{- $_ = set $env $key (include "hybridsearch.envValue" $val) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $key, $val := .component.env }}
{{- $_ = set $env $key (include "hybridsearch.envValue" $val) }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/* Pod scheduling keys: the component's own, else the chart-wide default. Args: root, component. */}}
{{- define "hybridsearch.scheduling" -}}
{{- with (.component.nodeSelector | default .root.Values.nodeSelector) }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.component.affinity | default .root.Values.affinity) }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- $tolerations := concat (.component.tolerations | default .root.Values.tolerations) (.extraTolerations | default list) }}
{{- with $tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Pod annotations: prometheus.io/* for the metrics port, then the chart's and the component's. Args: root, component, metricsPort. */}}
{{- define "hybridsearch.podAnnotations" -}}
{{- $ann := dict }}
{{- if and .root.Values.metrics.enabled .root.Values.metrics.podAnnotations }}
{{- $_ := set $ann "prometheus.io/scrape" "true" }}
{{- $_ := set $ann "prometheus.io/port" (include "hybridsearch.envValue" .metricsPort) }}
{{- $_ := set $ann "prometheus.io/path" (.metricsPath | default .root.Values.metrics.path) }}
{{- end }}
{{- $ann = merge (deepCopy (.component.podAnnotations | default dict)) (deepCopy .root.Values.podAnnotations) $ann }}
{{- with .checksum }}
{{- $_ := set $ann "checksum/config" . }}
{{- end }}
{{- with $ann }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* Service. Args: root, name, component, ports (list of {name, port}). */}}
{{- define "hybridsearch.service" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "hybridsearch.componentName" . }}
  labels: {{- include "hybridsearch.labels" . | nindent 4 }}
  {{- with (.component.service | default dict).annotations }}
  annotations: {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ (.component.service | default dict).type | default "ClusterIP" }}
  selector: {{- include "hybridsearch.selectorLabels" . | nindent 4 }}
  ports:
    {{- range .ports }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .name }}
      protocol: TCP
      {{- if hasPrefix "grpc" .name }}
      appProtocol: grpc
      {{- end }}
    {{- end }}
{{- end }}

{{/* HorizontalPodAutoscaler on CPU. Args: root, name, component. */}}
{{- define "hybridsearch.hpa" -}}
{{- $as := .component.autoscaling }}
{{- if $as.enabled }}
---
apiVersion: {{ include "hybridsearch.hpaApiVersion" .root }}
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "hybridsearch.componentName" . }}
  labels: {{- include "hybridsearch.labels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "hybridsearch.componentName" . }}
  minReplicas: {{ $as.minReplicas }}
  maxReplicas: {{ $as.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $as.targetCPUUtilizationPercentage }}
{{- end }}
{{- end }}

{{/* PodDisruptionBudget. Args: root, name, component. */}}
{{- define "hybridsearch.pdb" -}}
{{- $pdb := .component.podDisruptionBudget }}
{{- if $pdb.enabled }}
---
apiVersion: {{ include "hybridsearch.pdbApiVersion" .root }}
kind: PodDisruptionBudget
metadata:
  name: {{ include "hybridsearch.componentName" . }}
  labels: {{- include "hybridsearch.labels" . | nindent 4 }}
spec:
  {{- if hasKey $pdb "minAvailable" }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $pdb.maxUnavailable | default 1 }}
  {{- end }}
  selector:
    matchLabels: {{- include "hybridsearch.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{/* ServiceMonitor, only where the Prometheus Operator's API exists. Args: root, name, port (port name), path. */}}
{{- define "hybridsearch.serviceMonitor" -}}
{{- $sm := .root.Values.metrics.serviceMonitor }}
{{- if and .root.Values.metrics.enabled $sm.enabled (.root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "hybridsearch.componentName" . }}
  labels:
    {{- include "hybridsearch.labels" . | nindent 4 }}
    {{- with $sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels: {{- include "hybridsearch.selectorLabels" . | nindent 6 }}
  endpoints:
    - port: {{ .port }}
      path: {{ .path }}
      interval: {{ $sm.interval }}
{{- end }}
{{- end }}

{{/*
Everything of one Python service: Deployment, Service, HPA, PDB, ServiceMonitor.
Args: root, name, component, stateful (bool: holds an embedded engine's data), engineUrl (the external
engine's URL; empty = embedded).
*/}}
{{- define "hybridsearch.pythonService" -}}
{{- $root := .root }}
{{- $c := .component }}
{{- $name := .name }}
{{- $embedded := and .stateful (not .engineUrl) }}
{{- if and $embedded (or (gt (int $c.replicas) 1) $c.autoscaling.enabled) }}
{{- fail (printf "%s: the embedded engine keeps its data inside the pod, so %s.replicas must be 1 and %s.autoscaling.enabled false; point the chart at an external engine (externalOpenSearch.url / externalQdrant.url) to scale it" $name $name $name) }}
{{- end }}
{{- $fullName := include "hybridsearch.componentName" . }}
{{- $env := include "hybridsearch.envDict" . | fromYaml }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $fullName }}
  labels: {{- include "hybridsearch.labels" . | nindent 4 }}
spec:
  {{- if not $c.autoscaling.enabled }}
  replicas: {{ $c.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  {{- if $embedded }}
  # One pod owns the embedded engine's files: stop the old pod before the new one opens them.
  strategy:
    type: Recreate
  {{- end }}
  selector:
    matchLabels: {{- include "hybridsearch.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "hybridsearch.selectorLabels" . | nindent 8 }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with include "hybridsearch.podAnnotations" (dict "root" $root "component" $c "metricsPort" $root.Values.metrics.port) }}
      annotations: {{- . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "hybridsearch.serviceAccountName" $root }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets: {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext: {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: 30
      containers:
        - name: {{ $name }}
          image: {{ include "hybridsearch.image" (dict "root" $root "image" $root.Values.image) | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: ["serve", {{ $name | quote }}]
          ports:
            - name: grpc
              containerPort: {{ $c.port }}
              protocol: TCP
            {{- if $root.Values.metrics.enabled }}
            - name: metrics
              containerPort: {{ $root.Values.metrics.port }}
              protocol: TCP
            {{- end }}
          env:
            {{- range $key, $val := $env }}
            - name: {{ $key }}
              value: {{ $val | toString | quote }}
            {{- end }}
            {{- if eq $name "gateway" }}
            - name: HYBRIDSEARCH_PAGING__SECRET
              valueFrom:
                secretKeyRef:
                  name: {{ include "hybridsearch.pagingSecretName" $root }}
                  key: secret
            {{- end }}
            {{- with $root.Values.externalQdrant.apiKeySecret }}
            {{- if .name }}
            - name: HYBRIDSEARCH_VECTOR__QDRANT_API_KEY
              valueFrom:
                secretKeyRef:
                  name: {{ .name }}
                  key: {{ .key | default "api-key" }}
            {{- end }}
            {{- end }}
          {{- with $root.Values.envFrom }}
          envFrom: {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- include "hybridsearch.probes" (dict "root" $root "port" $c.port "grpc" (include "hybridsearch.plaintextProbes" $root) "exec" (list "grpc-health-check" (printf "127.0.0.1:%v" $c.port))) | trim | nindent 10 }}
          resources: {{- include "hybridsearch.quantities" $c.resources | nindent 12 }}
          securityContext: {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: data
              mountPath: /data
            - name: tmp
              mountPath: /tmp
            {{- include "hybridsearch.accessMounts" . | nindent 12 }}
      volumes:
        - name: data
          {{- if and $embedded $c.persistence.enabled }}
          persistentVolumeClaim:
            claimName: {{ $fullName }}
          {{- else }}
          emptyDir: {}
          {{- end }}
        - name: tmp
          emptyDir: {}
        {{- include "hybridsearch.accessVolumes" . | nindent 8 }}
      {{- include "hybridsearch.scheduling" (dict "root" $root "component" $c) | trim | nindent 6 }}
---
{{ include "hybridsearch.service" (dict "root" $root "name" $name "component" $c "ports" (ternary (list (dict "name" "grpc" "port" $c.port) (dict "name" "metrics" "port" $root.Values.metrics.port)) (list (dict "name" "grpc" "port" $c.port)) $root.Values.metrics.enabled)) }}
{{- include "hybridsearch.hpa" . }}
{{- include "hybridsearch.pdb" . }}
{{- include "hybridsearch.serviceMonitor" (dict "root" $root "name" $name "port" "metrics" "path" $root.Values.metrics.path) }}
{{- if and $embedded $c.persistence.enabled }}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ $fullName }}
  labels: {{- include "hybridsearch.labels" . | nindent 4 }}
  annotations:
    # Keep the index when the release is uninstalled.
    helm.sh/resource-policy: keep
spec:
  accessModes: [ReadWriteOnce]
  {{- with $c.persistence.storageClass }}
  storageClassName: {{ . | quote }}
  {{- end }}
  resources:
    requests:
      storage: {{ $c.persistence.size | toString | quote }}
{{- end }}
{{- end }}

{{/*
Resource requests/limits with every quantity as a string: Kubernetes accepts numbers in YAML, but
1.20's server-side apply types Quantity as string only and refuses `nvidia.com/gpu: 1`.
*/}}
{{- define "hybridsearch.quantities" -}}
{{- $out := dict -}}
{{- range $kind, $values := . -}}
{{- $quantities := dict -}}
{{- range $name, $value := $values -}}
{{- $_ := set $quantities $name (toString $value) -}}
{{- end -}}
{{- $_ := set $out $kind $quantities -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
