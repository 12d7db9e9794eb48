{{/*
The name of every object. "gpu-policy" unless fullnameOverride is set: the
same name whatever the release is called, as `gpu-policy manifests` uses.
*/}}
{{- define "gpu-policy.fullname" -}}
{{- default "gpu-policy" .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret holding the serving certificate (install::CERT_SECRET). */}}
{{- define "gpu-policy.tlsSecret" -}}
{{- printf "%s-tls" (include "gpu-policy.fullname" .) -}}
{{- end -}}

{{/*
Labels of every object, and the selector of the pods: the same two labels as
`gpu-policy manifests` (name = the object name, instance = the release).
*/}}
{{- define "gpu-policy.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/name: {{ include "gpu-policy.fullname" . }}
{{- end -}}

{{/* metadata of a namespaced object: name, namespace, labels. */}}
{{- define "gpu-policy.metadata" -}}
labels:
  {{- include "gpu-policy.labels" . | nindent 2 }}
name: {{ include "gpu-policy.fullname" . }}
namespace: {{ .Release.Namespace }}
{{- end -}}

{{- define "gpu-policy.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gpu-policy.certManager" -}}
{{- if eq .Values.certificates.mode "cert-manager" }}true{{ end -}}
{{- end -}}

{{/*
The workloads the allowlist may name, as install.rs / admission::Workload:
kind -> API group and resource, in Workload::ALL order.
*/}}
{{- define "gpu-policy.workloads" -}}
- {kind: Deployment, group: apps, resource: deployments}
- {kind: ReplicaSet, group: apps, resource: replicasets}
- {kind: StatefulSet, group: apps, resource: statefulsets}
- {kind: DaemonSet, group: apps, resource: daemonsets}
- {kind: Job, group: batch, resource: jobs}
- {kind: CronJob, group: batch, resource: cronjobs}
- {kind: ReplicationController, group: "", resource: replicationcontrollers}
- {kind: PodTemplate, group: "", resource: podtemplates}
{{- end -}}

{{/*
The checks of Settings::from_config that the schema cannot state, so that a
bad policy fails at `helm install` instead of in a crash-looping pod.
*/}}
{{- define "gpu-policy.validate" -}}
{{- $config := .Values.config -}}
{{- if and $config.runtimeClassName (not (has $config.runtimeClassName $config.gpuRuntimeClasses)) -}}
{{- fail (printf "config.gpuRuntimeClasses must include config.runtimeClassName %q" $config.runtimeClassName) -}}
{{- end -}}
{{- if eq (lower $config.visibleDevicesPin) "all" -}}
{{- fail "config.visibleDevicesPin: \"all\" would not hide the cards (use \"void\")" -}}
{{- end -}}
{{- end -}}

{{/*
Where the registry credentials Secret (imageResolution.pullSecret.name) is
mounted, and its dockerconfigjson file.
*/}}
{{- define "gpu-policy.registryCredentialsDir" -}}
/var/run/gpu-policy/registry
{{- end -}}
{{- define "gpu-policy.registryCredentialsFile" -}}
{{ include "gpu-policy.registryCredentialsDir" . }}/.dockerconfigjson
{{- end -}}

{{/*
The name of the reports CronJob and of its ServiceAccount and RBAC: a Job's
name is the CronJob's and 11 characters, at most 63.
*/}}
{{- define "gpu-policy.reportsName" -}}
{{- printf "%s-reports" (include "gpu-policy.fullname" . | trunc 44 | trimSuffix "-") -}}
{{- end -}}

{{/*
The cluster's Kubernetes release, 1.MINOR (a managed cluster's minor may end
in "+"): what `gpu-policy manifests --kube-version` takes.
*/}}
{{- define "gpu-policy.kubeRelease" -}}
{{- printf "%s.%s" .Capabilities.KubeVersion.Major (trimSuffix "+" .Capabilities.KubeVersion.Minor) -}}
{{- end -}}

{{/*
The bundled admission policies for the cluster's release; args: root, kind
(validating or mutating). files/policies/ holds KIND-1.MINOR.yaml only for
the releases whose output differs from the release before, so a release's
file is the newest one at or below it. The cluster's minor is clamped to the
supported releases (crates/policy-core/src/kubernetes_version.rs: OLDEST, NEWEST): a newer
cluster gets the newest release's policies. The path, or "" when no release
up to the cluster's has one (no MutatingAdmissionPolicy before 1.34).
*/}}
{{- define "gpu-policy.bundledPolicyFile" -}}
{{- $root := index . 0 -}}
{{- $kind := index . 1 -}}
{{- $oldest := 32 -}}
{{- $newest := 37 -}}
{{- $minor := max $oldest (min $newest (trimSuffix "+" $root.Capabilities.KubeVersion.Minor | atoi)) -}}
{{- $found := "" -}}
{{- range $release := untilStep (int $minor) (sub $oldest 1 | int) -1 -}}
{{- $path := printf "files/policies/%s-1.%d.yaml" $kind $release -}}
{{- if and (not $found) ($root.Files.Get $path) -}}
{{- $found = $path -}}
{{- end -}}
{{- end -}}
{{- $found -}}
{{- end -}}
