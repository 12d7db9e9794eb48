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
