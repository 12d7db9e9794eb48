{{/* Parts of the webhook configurations (install.rs). */}}
{{- define "gpu-policy.webhookMetadata" -}}
labels:
  {{- include "gpu-policy.labels" . | nindent 2 }}
name: {{ include "gpu-policy.fullname" . }}
{{- if include "gpu-policy.certManager" . }}
{{- /* cert-manager's CA injector fills every caBundle from this Certificate. */}}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "gpu-policy.fullname" .) }}
{{- end }}
{{- end -}}
{{- /* The fields every entry shares (install::common); args: root, path, failurePolicy. */ -}}
{{- define "gpu-policy.webhookCommon" -}}
{{- $root := index . 0 -}}
admissionReviewVersions: [v1]
clientConfig:
  service:
    name: {{ include "gpu-policy.fullname" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ index . 1 }}
    port: 443
failurePolicy: {{ index . 2 }}
matchPolicy: Equivalent
sideEffects: None
timeoutSeconds: 5
{{- end -}}
{{- define "gpu-policy.podRules" -}}
- apiGroups: [""]
  apiVersions: [v1]
  operations: [CREATE]
  resources: [pods]
  scope: Namespaced
- apiGroups: [""]
  apiVersions: [v1]
  operations: [UPDATE]
  resources: [pods/ephemeralcontainers]
  scope: Namespaced
{{- end -}}
{{- /*
Never call the webhook for its own namespace: a broken webhook must not block
its own repair. args: namespace, mode ("" for none).
*/ -}}
{{- define "gpu-policy.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: [{{ index . 0 | quote }}]
  {{- if index . 1 }}
  - key: gpu-policy.io/mode
    operator: In
    values: [{{ index . 1 }}]
  {{- end }}
{{- end -}}
