{{/* Names, labels, the checks that refuse a bad set of values, and the pieces every role's pod shares. */}}

{{- define "vcfleet.fullname" -}}
{{- printf "%s-vcfleet" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "vcfleet.labels" -}}
app.kubernetes.io/name: vcfleet
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: vcfleet-{{ .root.Chart.Version }}
{{- end -}}

{{- define "vcfleet.selector" -}}
app.kubernetes.io/name: vcfleet
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "vcfleet.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-keys" (include "vcfleet.fullname" .)) -}}
{{- end -}}

{{/* Values that cannot work, refused at render with what to do. */}}
{{- define "vcfleet.validate" -}}
{{- $modes := list "internal" "standalone" "sentinel" "cluster" -}}
{{- if not (has .Values.redis.mode $modes) -}}
{{- fail (printf "redis.mode is %q: use one of internal, standalone, sentinel, cluster" .Values.redis.mode) -}}
{{- end -}}
{{- if not (kindIs "string" .Values.prefix) -}}
{{- fail (printf "prefix must be a string, not %v (helm --set reads {…} as a list: write prefix: \"{vcfleet}\" in a values file, or --set-string 'prefix=\\{vcfleet\\}')" .Values.prefix) -}}
{{- end -}}
{{- if and (eq .Values.redis.mode "cluster") (not (regexMatch "\\{[^{}]+\\}" .Values.prefix)) -}}
{{- fail (printf "redis.mode=cluster needs a hash-tagged prefix so that every key of the fleet is in one slot (BullMQ's scripts need it): prefix is %q; write prefix: \"{%s}\" in your values file (or --set-string 'prefix=\\{%s\\}')" .Values.prefix .Values.prefix .Values.prefix) -}}
{{- end -}}
{{- if and (eq .Values.redis.mode "cluster") (empty .Values.redis.cluster.nodes) -}}
{{- fail "redis.mode=cluster needs redis.cluster.nodes: every primary and replica as host:port" -}}
{{- end -}}
{{- if and (eq .Values.redis.mode "sentinel") (empty .Values.redis.sentinel.sentinels) -}}
{{- fail "redis.mode=sentinel needs redis.sentinel.sentinels (host:26379 each) and redis.sentinel.name" -}}
{{- end -}}
{{- if and (eq .Values.redis.mode "standalone") (empty .Values.redis.standalone.host) -}}
{{- fail "redis.mode=standalone needs redis.standalone.host (a server or a managed primary endpoint)" -}}
{{- end -}}
{{- if not (has .Values.sandbox.provider (list "local" "opensandbox")) -}}
{{- fail (printf "sandbox.provider is %q: use local or opensandbox" .Values.sandbox.provider) -}}
{{- end -}}
{{- if and (eq .Values.sandbox.provider "opensandbox") (empty .Values.sandbox.opensandbox.domain) -}}
{{- fail "sandbox.provider=opensandbox needs sandbox.opensandbox.domain: the OpenSandbox server (host:port)" -}}
{{- end -}}
{{- if not (has .Values.keda.sandboxMode (list "scaledObject" "scaledJob")) -}}
{{- fail (printf "keda.sandboxMode is %q: use scaledObject or scaledJob" .Values.keda.sandboxMode) -}}
{{- end -}}
{{- if and .Values.serve.enabled (empty .Values.runId) -}}
{{- fail "serve.enabled needs runId: the run the service serves (its workers serve the same run's queues)" -}}
{{- end -}}
{{- end -}}

{{/* REDIS_URL with the password from the Secret ($(REDIS_PASSWORD), expanded by the kubelet). */}}
{{- define "vcfleet.redisUrl" -}}
{{- $r := .Values.redis -}}
{{- if eq $r.mode "internal" -}}
redis://:$(REDIS_PASSWORD)@{{ include "vcfleet.fullname" . }}-redis:6379
{{- else if eq $r.mode "standalone" -}}
{{ ternary "rediss" "redis" $r.standalone.tls }}://:$(REDIS_PASSWORD)@{{ $r.standalone.host }}:{{ $r.standalone.port }}
{{- else if eq $r.mode "sentinel" -}}
{{ ternary "rediss" "redis" $r.sentinel.tls }}+sentinel://:$(REDIS_PASSWORD)@{{ join "," $r.sentinel.sentinels }}/{{ $r.sentinel.name }}
{{- else -}}
{{ ternary "rediss" "redis" $r.cluster.tls }}+cluster://:$(REDIS_PASSWORD)@{{ join "," $r.cluster.nodes }}
{{- end -}}
{{- end -}}

{{/* The keys each role gets from the Secret (besides Redis's): only those it uses. */}}
{{- define "vcfleet.roleKeys" -}}
{{- $keys := dict "sandbox" (list "POLICY_API_KEY" "OPENSANDBOX_API_KEY") "judge" (list "OPENAI_API_KEY") "dashboard" (list "VCFLEET_DASHBOARD_PASSWORD" "VCFLEET_DASHBOARD_TOKEN") "serve" (list "VCFLEET_DASHBOARD_PASSWORD" "VCFLEET_DASHBOARD_TOKEN") -}}
{{- toJson (get $keys .role | default list) -}}
{{- end -}}

{{/* env of a role: Redis's password and its own keys from the Secret (each but Redis's optional), then REDIS_URL built on them. */}}
{{- define "vcfleet.env" -}}
{{- $secret := include "vcfleet.secretName" .root -}}
{{- $keys := concat (list "REDIS_PASSWORD" "REDIS_SENTINEL_PASSWORD") (include "vcfleet.roleKeys" . | fromJsonArray) -}}
{{- range $key := $keys }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: {{ $key }}, optional: {{ ne $key "REDIS_PASSWORD" }}}
{{- end }}
- name: REDIS_URL
  value: {{ include "vcfleet.redisUrl" .root | quote }}
{{- if and (eq .role "sandbox") (eq .root.Values.sandbox.provider "opensandbox") }}
# Where the sandbox pods reach this worker's policy gateway.
- name: VCFLEET_GATEWAY_HOST
  valueFrom:
    fieldRef: {fieldPath: status.podIP}
{{- end }}
{{- end -}}

{{/* One role's container. dict: root, role, name, args, command (optional), port (optional), probePath, probePort */}}
{{- define "vcfleet.container" -}}
{{- $v := .root.Values -}}
- name: {{ .name }}
  image: "{{ $v.image.repository }}:{{ $v.image.tag }}"
  imagePullPolicy: {{ $v.image.pullPolicy }}
  {{- with .command }}
  command: {{ toJson . }}
  {{- end }}
  args: {{ toJson .args }}
  envFrom:
    - configMapRef: {name: {{ include "vcfleet.fullname" .root }}-settings}
  env:
    {{- include "vcfleet.env" (dict "root" .root "role" .role) | nindent 4 }}
    {{- with .extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - {name: metrics, containerPort: {{ $v.metricsPort }}}
    {{- with .port }}
    - {name: http, containerPort: {{ . }}}
    {{- end }}
  {{- if .probePath }}
  startupProbe:
    httpGet: {path: {{ .probePath }}, port: {{ .probePort }}}
    periodSeconds: 5
    failureThreshold: 60
  readinessProbe:
    httpGet: {path: {{ .probePath }}, port: {{ .probePort }}}
    periodSeconds: 10
    timeoutSeconds: 5
  livenessProbe:
    httpGet: {path: {{ .probePath }}, port: {{ .probePort }}}
    periodSeconds: 10
    timeoutSeconds: 5
    failureThreshold: 3
  {{- end }}
  {{- with .preStop }}
  lifecycle:
    preStop:
      exec: {command: {{ toJson . }}}
  {{- end }}
  resources: {{ toJson .resources }}
  {{- with .securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .volumeMounts }}
  volumeMounts:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
