{{/*
The chart's name, and the full name of the release's objects (cut to 63 characters, the longest
label value).
*/}}
{{- define "talos-ccm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "talos-ccm.fullname" -}}
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

{{- define "talos-ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "talos-ccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "talos-ccm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "talos-ccm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: cloud-controller-manager
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "talos-ccm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "talos-ccm.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The talos.dev ServiceAccount, and the Secret Talos creates for it: they have the same name.
*/}}
{{- define "talos-ccm.talosServiceAccountName" -}}
{{- default (printf "%s-talos-secrets" (include "talos-ccm.fullname" .) | trunc 63 | trimSuffix "-") .Values.talosServiceAccount.name }}
{{- end }}

{{- define "talos-ccm.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The --controllers list as given (a list, or a comma-separated string).
*/}}
{{- define "talos-ccm.controllersSpec" -}}
{{- $spec := .Values.controllers }}
{{- if kindIs "string" $spec }}
{{- $spec = splitList "," $spec }}
{{- end }}
{{- if not $spec }}
{{- $spec = list "*" }}
{{- end }}
{{- $items := list }}
{{- range $spec }}
{{- $items = append $items (trim (toString .)) }}
{{- end }}
{{- join "," $items }}
{{- end }}

{{/*
The controllers that --controllers enables, comma-separated in start order, resolved as talos-ccm
resolves them (internal/app/controllers.go): "*" is the default set (without re-enabling one removed
before it), "name" adds one, "-name" removes one; nodeIPAM.allocateNodeCIDRs adds node-ipam. The RBAC rules are computed from this list, and
test/deploy checks that it agrees with talos-ccm's own resolution.
*/}}
{{- define "talos-ccm.enabledControllers" -}}
{{- $all := list "cloud-node" "csr-approval" "node-ipam" "service-lb" "node-lifecycle" }}
{{- $defaults := list "cloud-node" "csr-approval" "node-lifecycle" }}
{{- $state := dict }}
{{- range $item := splitList "," (include "talos-ccm.controllersSpec" .) }}
{{- if eq $item "*" }}
{{- range $name := $defaults }}
{{- if not (hasKey $state $name) }}
{{- $_ := set $state $name true }}
{{- end }}
{{- end }}
{{- else if hasPrefix "-" $item }}
{{- $name := trimPrefix "-" $item }}
{{- if not (has $name $all) }}
{{- fail (printf "unknown controller %q in controllers (known: %s)" $name (join ", " $all)) }}
{{- end }}
{{- $_ := set $state $name false }}
{{- else }}
{{- if not (has $item $all) }}
{{- fail (printf "unknown controller %q in controllers (known: %s)" $item (join ", " $all)) }}
{{- end }}
{{- $_ := set $state $item true }}
{{- end }}
{{- end }}
{{- if .Values.nodeIPAM.allocateNodeCIDRs }}
{{- if eq (get $state "node-ipam" | toString) "false" }}
{{- fail "nodeIPAM.allocateNodeCIDRs turns node-ipam on, and controllers removes it" }}
{{- end }}
{{- $_ := set $state "node-ipam" true }}
{{- end }}
{{- $enabled := list }}
{{- range $name := $all }}
{{- if get $state $name }}
{{- $enabled = append $enabled $name }}
{{- end }}
{{- end }}
{{- if not $enabled }}
{{- fail (printf "controllers %q enables no controller" (include "talos-ccm.controllersSpec" .)) }}
{{- end }}
{{- join "," $enabled }}
{{- end }}

{{/*
"true" when an enabled controller cannot work without the Talos API (as internal/app decides), so the
Talos credentials must be mounted; without one, the Secret is optional (CSR approval alone).
*/}}
{{- define "talos-ccm.needsTalos" -}}
{{- $enabled := splitList "," (include "talos-ccm.enabledControllers" .) }}
{{- if or (has "cloud-node" $enabled) (has "node-lifecycle" $enabled) (has "node-ipam" $enabled) }}true{{ end }}
{{- end }}

{{/*
"true" when talos-ccm may delete Nodes: node-lifecycle is enabled with a deletion flag.
*/}}
{{- define "talos-ccm.deletesNodes" -}}
{{- $enabled := splitList "," (include "talos-ccm.enabledControllers" .) }}
{{- if and (has "node-lifecycle" $enabled) (or .Values.nodeLifecycle.deleteStaleNodes .Values.nodeLifecycle.deletePreemptedSpotNodes) }}true{{ end }}
{{- end }}

{{- define "talos-ccm.isDaemonSet" -}}
{{- if eq .Values.mode "DaemonSet" }}true{{ else if ne .Values.mode "Deployment" }}{{ fail (printf "mode must be Deployment or DaemonSet, not %q" .Values.mode) }}{{ end }}
{{- end }}

{{- define "talos-ccm.hostNetwork" -}}
{{- if or (include "talos-ccm.isDaemonSet" .) .Values.hostNetwork }}true{{ end }}
{{- end }}

{{/*
The leader election Lease, in the release namespace.
*/}}
{{- define "talos-ccm.leaseName" -}}
{{- default (include "talos-ccm.fullname" .) .Values.leaderElection.resourceName }}
{{- end }}

{{- define "talos-ccm.pvcName" -}}
{{- default (printf "%s-state" (include "talos-ccm.fullname" .)) .Values.state.persistentVolumeClaim.existingClaim }}
{{- end }}

{{/*
Checks of value combinations that would render objects that cannot work.
*/}}
{{- define "talos-ccm.validate" -}}
{{- /* Values of the Talos CCM chart, which would otherwise be ignored without a word. */}}
{{- $legacy := dict
  "replicaCount" "replicas"
  "enabledControllers" "controllers (cloud-node, csr-approval, node-lifecycle, node-ipam, service-lb)"
  "useDaemonSet" "mode: DaemonSet"
  "transformations" "config.transformations"
  "logVerbosityLevel" "logLevel (debug, info, warn or error)"
  "service" "metrics.service and metrics.port"
}}
{{- range $key, $hint := $legacy }}
{{- if hasKey $.Values $key }}
{{- fail (printf "%s is a value of the Talos CCM chart: talos-ccm's is %s (see deploy/README.md)" $key $hint) }}
{{- end }}
{{- end }}
{{- $daemonSet := include "talos-ccm.isDaemonSet" . }}
{{- if not (has .Values.state.type (list "emptyDir" "persistentVolumeClaim")) }}
{{- fail (printf "state.type must be emptyDir or persistentVolumeClaim, not %q" .Values.state.type) }}
{{- end }}
{{- if eq .Values.state.type "persistentVolumeClaim" }}
{{- if $daemonSet }}
{{- fail "state.type persistentVolumeClaim needs mode Deployment: the pods of a DaemonSet cannot share one claim" }}
{{- end }}
{{- $shared := or (has "ReadWriteMany" .Values.state.persistentVolumeClaim.accessModes) .Values.state.persistentVolumeClaim.existingClaim }}
{{- if and (gt (int .Values.replicas) 1) (not $shared) }}
{{- fail "state.type persistentVolumeClaim with a ReadWriteOnce claim needs replicas: 1 (one pod mounts it at a time)" }}
{{- end }}
{{- end }}
{{- if not (has .Values.podAntiAffinity (list "soft" "hard" "none")) }}
{{- fail (printf "podAntiAffinity must be soft, hard or none, not %q" .Values.podAntiAffinity) }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not (and .Values.metrics.enabled .Values.metrics.service.enabled)) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled and metrics.service.enabled" }}
{{- end }}
{{- if and .Values.metrics.tls.secretName (or .Values.metrics.tls.certFile .Values.metrics.tls.keyFile) }}
{{- fail "set either metrics.tls.secretName or metrics.tls.certFile and keyFile, not both" }}
{{- end }}
{{- if ne (empty .Values.metrics.tls.certFile) (empty .Values.metrics.tls.keyFile) }}
{{- fail "metrics.tls.certFile and metrics.tls.keyFile go together" }}
{{- end }}
{{- if and .Values.metrics.enabled (not .Values.metrics.secure) }}
{{- $host := regexReplaceAll ":[0-9]*$" (default "" .Values.metrics.bindAddress) "" | trimPrefix "[" | trimSuffix "]" }}
{{- if not (or (eq $host "localhost") (hasPrefix "127." $host) (eq $host "::1")) }}
{{- fail "metrics.secure false serves plain HTTP without authentication: it needs a localhost metrics.bindAddress (127.0.0.1:<port>), which talos-ccm requires too" }}
{{- end }}
{{- end }}
{{- if and .Values.api.tls.secretName (or .Values.api.tls.cert .Values.api.tls.key .Values.api.tls.clientCA) }}
{{- fail "set either api.tls.secretName or api.tls.cert, key and clientCA, not both" }}
{{- end }}
{{- end }}

{{/*
A list, or a string as is, comma-separated.
*/}}
{{- define "talos-ccm.csv" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ join "," . }}{{ end }}
{{- end }}

{{/*
The arguments of talos-ccm, one per line as a YAML list. A value that is null or empty is left out,
so talos-ccm's own default applies.
*/}}
{{- define "talos-ccm.args" -}}
{{- $v := .Values }}
- {{ printf "--controllers=%v" (include "talos-ccm.controllersSpec" .) | quote }}
- {{ printf "--state-dir=%v" ($v.state.mountPath) | quote }}
{{- if $v.state.rebuildIfUnreadable }}
- "--rebuild-state=true"
{{- end }}
- "--config=/etc/talos-ccm/config/config.yaml"
- {{ printf "--leader-elect=%v" ($v.leaderElection.enabled) | quote }}
{{- if $v.leaderElection.enabled }}
- {{ printf "--leader-elect-resource-namespace=%v" .Release.Namespace | quote }}
- {{ printf "--leader-elect-resource-name=%v" (include "talos-ccm.leaseName" .) | quote }}
{{- with $v.leaderElection.leaseDuration }}
- {{ printf "--leader-elect-lease-duration=%v" . | quote }}
{{- end }}
{{- with $v.leaderElection.renewDeadline }}
- {{ printf "--leader-elect-renew-deadline=%v" . | quote }}
{{- end }}
{{- with $v.leaderElection.retryPeriod }}
- {{ printf "--leader-elect-retry-period=%v" . | quote }}
{{- end }}
{{- end }}
- {{ printf "--health-probe-bind-address=%v" (default (printf ":%d" (int $v.healthProbes.port)) $v.healthProbes.bindAddress) | quote }}
{{- if $v.metrics.enabled }}
- {{ printf "--metrics-bind-address=%v" (default (printf ":%d" (int $v.metrics.port)) $v.metrics.bindAddress) | quote }}
- {{ printf "--metrics-secure=%v" $v.metrics.secure | quote }}
{{- if $v.metrics.tls.secretName }}
- "--tls-cert-file=/etc/talos-ccm/metrics-tls/tls.crt"
- "--tls-private-key-file=/etc/talos-ccm/metrics-tls/tls.key"
{{- end }}
{{- with $v.metrics.tls.certFile }}
- {{ printf "--tls-cert-file=%v" . | quote }}
{{- end }}
{{- with $v.metrics.tls.keyFile }}
- {{ printf "--tls-private-key-file=%v" . | quote }}
{{- end }}
{{- if $v.metrics.profiling }}
- "--profiling=true"
{{- end }}
{{- else }}
- "--metrics-bind-address=0"
{{- end }}
{{- with $v.clusterName }}
- {{ printf "--cluster-name=%v" . | quote }}
{{- end }}
{{- if $v.preferIPv6 }}
- "--prefer-ipv6=true"
{{- end }}
{{- if and (kindIs "bool" $v.betaTopologyLabels) (not $v.betaTopologyLabels) }}
- "--beta-topology-labels=false"
{{- end }}
{{- with $v.providerIDWait }}
- {{ printf "--provider-id-wait=%v" . | quote }}
{{- end }}
{{- with $v.concurrency }}
- {{ printf "--concurrency=%v" (int64 .) | quote }}
{{- end }}
{{- with $v.csrConcurrency }}
- {{ printf "--csr-concurrency=%v" (int64 .) | quote }}
{{- end }}
{{- with $v.serviceLBConcurrency }}
- {{ printf "--service-lb-concurrency=%v" (int64 .) | quote }}
{{- end }}
{{- with $v.nodeLifecycleConcurrency }}
- {{ printf "--node-lifecycle-concurrency=%v" (int64 .) | quote }}
{{- end }}
{{- with $v.logLevel }}
- {{ printf "--log-level=%v" . | quote }}
{{- end }}
{{- with $v.kubeAPI.qps }}
- {{ printf "--kube-api-qps=%v" . | quote }}
{{- end }}
{{- with $v.kubeAPI.burst }}
- {{ printf "--kube-api-burst=%v" (int64 .) | quote }}
{{- end }}
{{- with $v.kubeAPI.kubeconfig }}
- {{ printf "--kubeconfig=%v" . | quote }}
{{- end }}
{{- with $v.talos.configPath }}
- {{ printf "--talosconfig=%v" . | quote }}
{{- end }}
{{- with $v.talos.endpoints }}
- {{ printf "--talos-endpoints=%v" (join "," .) | quote }}
{{- end }}
{{- with $v.talos.timeout }}
- {{ printf "--talos-timeout=%v" . | quote }}
{{- end }}
{{- with $v.talos.retryMax }}
- {{ printf "--talos-retry-max=%v" . | quote }}
{{- end }}
{{- with $v.talos.platformRefreshPeriod }}
- {{ printf "--talos-platform-refresh-period=%v" . | quote }}
{{- end }}
{{- with $v.talos.probePeriod }}
- {{ printf "--talos-probe-period=%v" . | quote }}
{{- end }}
{{- with $v.talos.controllerManagerConfigRefreshPeriod }}
- {{ printf "--talos-controller-manager-config-refresh-period=%v" . | quote }}
{{- end }}
{{- with $v.talos.controllerManagerConfigRetryMin }}
- {{ printf "--talos-controller-manager-config-retry-min=%v" . | quote }}
{{- end }}
{{- with $v.talos.controllerManagerConfigRetryMax }}
- {{ printf "--talos-controller-manager-config-retry-max=%v" . | quote }}
{{- end }}
{{- if $v.nodeLifecycle.deleteStaleNodes }}
- "--delete-stale-nodes=true"
{{- end }}
{{- if $v.nodeLifecycle.deletePreemptedSpotNodes }}
- "--delete-preempted-spot-nodes=true"
{{- end }}
{{- with $v.nodeLifecycle.staleNodeGrace }}
- {{ printf "--stale-node-grace=%v" . | quote }}
{{- end }}
{{- with $v.csrApproval.maxExpiration }}
- {{ printf "--csr-max-expiration=%v" . | quote }}
{{- end }}
{{- with $v.csrApproval.requestsPerMinute }}
- {{ printf "--csr-requests-per-minute=%v" . | quote }}
{{- end }}
{{- with $v.clusterDomain }}
- {{ printf "--cluster-domain=%v" . | quote }}
{{- end }}
{{- with $v.serviceClusterIPRange }}
- {{ printf "--service-cluster-ip-range=%v" (include "talos-ccm.csv" .) | quote }}
{{- end }}
{{- if $v.nodeIPAM.allocateNodeCIDRs }}
- "--allocate-node-cidrs=true"
{{- end }}
{{- with $v.nodeIPAM.mode }}
- {{ printf "--node-ipam-mode=%v" . | quote }}
{{- end }}
{{- with $v.nodeIPAM.clusterCIDR }}
- {{ printf "--cluster-cidr=%v" (include "talos-ccm.csv" .) | quote }}
{{- end }}
{{- with $v.nodeIPAM.nodeCIDRMaskSizeIPv4 }}
- {{ printf "--node-cidr-mask-size-ipv4=%v" (int64 .) | quote }}
{{- end }}
{{- with $v.nodeIPAM.nodeCIDRMaskSizeIPv6 }}
- {{ printf "--node-cidr-mask-size-ipv6=%v" (int64 .) | quote }}
{{- end }}
{{- if not (kindIs "invalid" $v.api.listen) }}
- {{ printf "--api-listen=%v" ($v.api.listen) | quote }}
{{- end }}
{{- if $v.api.tls.secretName }}
- "--api-tls-cert=/etc/talos-ccm/api-tls/tls.crt"
- "--api-tls-key=/etc/talos-ccm/api-tls/tls.key"
- "--api-client-ca=/etc/talos-ccm/api-tls/ca.crt"
{{- end }}
{{- with $v.api.tls.cert }}
- {{ printf "--api-tls-cert=%v" . | quote }}
{{- end }}
{{- with $v.api.tls.key }}
- {{ printf "--api-tls-key=%v" . | quote }}
{{- end }}
{{- with $v.api.tls.clientCA }}
- {{ printf "--api-client-ca=%v" . | quote }}
{{- end }}
{{- range $v.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
