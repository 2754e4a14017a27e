{{/*
The sandbox-worker's pod spec, shared by its Deployment and the KEDA ScaledJob (one rollout at a
time there: concurrency 1, extra args "--max-jobs 1 --idle-exit …").

local sandboxes are bubblewrap namespaces (user, pid, net, mount) the worker makes inside its own
container, each held to sandbox_config.resources by a cgroup and a tmpfs of its own. As in
docker-compose.yml, the container therefore needs (and nothing more: not privileged):
- runAsUser 0 and CAP_SYS_ADMIN: mount a tmpfs per sandbox, and set up bwrap's namespaces where the
  node disables unprivileged user namespaces. The sandboxes themselves run with no capability.
- the cgroup: the container's own cgroup namespace (the default on cgroup v2) is the root of what the
  worker sees; the entrypoint (docker-compose.yml's, the same words) remounts /sys/fs/cgroup
  read-write, which the runtime mounts read-only, so the worker makes a child cgroup per sandbox
  inside the pod's limits. Nothing outside the pod's cgroup is reachable.
- seccomp: the runtime's default profile refuses pivot_root, which bwrap needs even with
  CAP_SYS_ADMIN; sandbox-worker-seccomp.json (Localhost profile on the nodes) allows what bwrap and
  the mounts need and refuses the rest, or Unconfined.
- AppArmor Unconfined: the runtime's default profile refuses mount.
- procMount Unmasked: the masked /proc paths keep bwrap from mounting a fresh /proc for the
  sandbox's PID namespace (Docker: systempaths=unconfined).
opensandbox needs none of it: the worker runs as the image's `node` user with no capability, and
each sandbox is a pod the OpenSandbox server makes.
*/}}
{{- define "vcfleet.sandboxPod" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $local := eq $v.sandbox.provider "local" -}}
{{- $args := list "worker" "sandbox" "--concurrency" (.concurrency | default $v.sandbox.rolloutConcurrency | toString) "--drain-grace" ($v.taskTimeoutS | toString) -}}
{{- with $v.runId }}{{ $args = concat $args (list "--run-id" .) }}{{ end -}}
{{- $args = concat $args (.extraArgs | default list) $v.sandbox.extraArgs -}}
{{- $command := list -}}
{{- $security := dict "runAsNonRoot" true "allowPrivilegeEscalation" false "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- if $local -}}
{{- $seccomp := $v.sandbox.local.seccomp -}}
{{- if ne $seccomp.type "Localhost" }}{{ $seccomp = dict "type" $seccomp.type }}{{ end -}}
{{- $command = list "/bin/sh" "-c" (include "vcfleet.cgroupEntrypoint" .) "vcfleet" -}}
{{- $security = dict "runAsUser" 0 "runAsNonRoot" false "privileged" false "capabilities" (dict "add" (list "SYS_ADMIN")) "seccompProfile" $seccomp "appArmorProfile" (dict "type" $v.sandbox.local.appArmor) "procMount" $v.sandbox.local.procMount -}}
{{- end -}}
metadata:
  labels: {{- include "vcfleet.labels" (dict "root" $root "role" "sandbox") | nindent 4 }}
  annotations:
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ $v.metricsPort | quote }}
    checksum/settings: {{ include (print $root.Template.BasePath "/settings.yaml") $root | sha256sum }}
spec:
  {{- with $v.imagePullSecrets }}
  imagePullSecrets: {{ toJson . }}
  {{- end }}
  {{- if .restartPolicy }}
  restartPolicy: {{ .restartPolicy }}
  {{- end }}
  # task_timeout_s for the running rollouts to finish (the preStop drain), then the time to hand the
  # rest back and close.
  terminationGracePeriodSeconds: {{ add $v.taskTimeoutS $v.drainSeconds }}
  containers:
    {{- include "vcfleet.container" (dict "root" $root "role" "sandbox" "name" "sandbox-worker" "args" $args "command" $command "probePath" "/metrics" "probePort" "metrics" "preStop" (list "node" "bin/vcfleet-drain.js") "resources" $v.sandbox.resources "securityContext" $security) | nindent 4 }}
{{- end -}}

{{/* docker-compose.yml's sandbox-worker entrypoint, word for word ($$ is an escaped $ to both). */}}
{{- define "vcfleet.cgroupEntrypoint" -}}
for m in $$(grep -E ' - cgroup2? ' /proc/self/mountinfo | cut -d' ' -f5); do
  # bind: only this mount's flag (cgroup v1's hierarchies are bind mounts of the host's; a
  # plain remount of them fails with EBUSY).
  mount -o remount,bind,rw "$$m" 2>/dev/null || mount -o remount,rw "$$m" ||
    echo "cannot remount $$m read-write: the worker will report its cgroups as not enforced" >&2
done
exec /usr/bin/tini -- node bin/vcfleet.js "$$@"
{{ end -}}
