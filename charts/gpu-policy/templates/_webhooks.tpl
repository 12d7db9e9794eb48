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
{{- /*
The resource.k8s.io version the claim rules name: v1 from Kubernetes 1.34;
1.32 and 1.33 serve claims only as v1beta1 (when DRA is turned on), where a
rule naming v1 would match nothing.
*/ -}}
{{- define "gpu-policy.resourceClaimVersion" -}}
{{- ternary "v1" "v1beta1" (semverCompare ">=1.34.0-0" .Capabilities.KubeVersion.Version) -}}
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
{{- /* A Pod's own updates, narrowed by gpu-policy.podMatchConditions. */}}
- apiGroups: [""]
  apiVersions: [v1]
  operations: [UPDATE]
  resources: [pods]
  scope: Namespaced
{{- end -}}
{{- /*
Every request but a Pod's update passes; a Pod's update passes when it changes
a container's image or env, runtimeClassName, the affinity or a gpu-policy.io/
annotation (install::POD_UPDATE_CONDITION): the updates controllers make all
the time never reach the webhook.
*/ -}}
{{- define "gpu-policy.podMatchConditions" -}}
- name: pod-updates-gpu-policy-governs
  expression: >-
    request.operation != 'UPDATE' || request.resource.resource != 'pods' || (has(request.subResource) && request.subResource != '') || !has(object.spec) || !has(oldObject.spec) || object.spec.containers.map(c, has(c.image) ? c.image : '') != oldObject.spec.containers.map(c, has(c.image) ? c.image : '') || object.spec.containers.map(c, has(c.env) ? c.env : []) != oldObject.spec.containers.map(c, has(c.env) ? c.env : []) || (has(object.spec.initContainers) ? object.spec.initContainers : []).map(c, has(c.image) ? c.image : '') != (has(oldObject.spec.initContainers) ? oldObject.spec.initContainers : []).map(c, has(c.image) ? c.image : '') || (has(object.spec.initContainers) ? object.spec.initContainers : []).map(c, has(c.env) ? c.env : []) != (has(oldObject.spec.initContainers) ? oldObject.spec.initContainers : []).map(c, has(c.env) ? c.env : []) || (has(object.spec.runtimeClassName) ? object.spec.runtimeClassName : '') != (has(oldObject.spec.runtimeClassName) ? oldObject.spec.runtimeClassName : '') || (has(object.spec.affinity) ? object.spec.affinity : {}) != (has(oldObject.spec.affinity) ? oldObject.spec.affinity : {}) || (has(object.spec.tolerations) ? object.spec.tolerations : []) != (has(oldObject.spec.tolerations) ? oldObject.spec.tolerations : []) || (has(object.metadata.annotations) ? object.metadata.annotations : {}).exists(k, k.startsWith('gpu-policy.io/') && !(has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations && oldObject.metadata.annotations[k] == object.metadata.annotations[k])) || (has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}).exists(k, k.startsWith('gpu-policy.io/') && !(has(object.metadata.annotations) && k in object.metadata.annotations))
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
