{{/*
Access: TLS / mutual TLS between services and API keys at the gateway (docs/security.md). Secrets hold
cert-manager's keys (tls.crt, tls.key, ca.crt); without a secretName the chart makes them (access-secrets.yaml).
*/}}
{{- define "hybridsearch.tlsSecretName" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "hybridsearch.fullname" .)) }}
{{- end }}

{{- define "hybridsearch.apiKeysSecretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-api-keys" (include "hybridsearch.fullname" .)) }}
{{- end }}

{{/*
Sealed collections' keys (docs/security.md "Sealed at rest"): the Secret sealing.keysSecret, mounted read-only
as a directory (no subPath: a Secret applied anew reaches running pods by the kubelet's symlink swap, which
the keys file reader watches) into the components that read keys, and only those: the gateway seals writes
and opens answers, expansion reads its feedback probe's texts and seals its cache, reconcile copies sealed
records between the stores. bm25, vector, fusion and Triton never hold a key.
*/}}
{{- define "hybridsearch.sealingKeyReaders" -}}
gateway expansion reconcile
{{- end }}

{{/* Whether this component mounts the sealing keys: "true" or empty. Args: root, name. */}}
{{- define "hybridsearch.readsSealingKeys" -}}
{{- if and .root.Values.sealing.keysSecret (has .name (splitList " " (include "hybridsearch.sealingKeyReaders" .root))) }}true{{- end }}
{{- end }}

{{/* A sealed collection without the Secret its keys come from is refused at render, not at its first write. */}}
{{- define "hybridsearch.sealingCheck" -}}
{{- if not .Values.sealing.keysSecret }}
{{- range $name, $c := .Values.collections }}
{{- if and (kindIs "map" $c) $c.sealed }}
{{- fail (printf "collections.%s is sealed: set sealing.keysSecret to the Secret holding its key (docs/security.md)" $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Whether a component's probes can be native gRPC: the kubelet's gRPC probe speaks no TLS. Args: root. */}}
{{- define "hybridsearch.plaintextProbes" -}}
{{- if not .Values.tls.enabled }}true{{- end }}
{{- end }}

{{/* HYBRIDSEARCH_TLS__* / HYBRIDSEARCH_AUTH__* of one service as YAML. Args: root, name. */}}
{{- define "hybridsearch.accessEnv" -}}
{{- $v := .root.Values }}
{{- $env := dict "HYBRIDSEARCH_TLS__ENABLED" (toString $v.tls.enabled) }}
{{- if $v.tls.enabled }}
{{- $own := ternary "/etc/hybridsearch/gateway-tls" "/etc/hybridsearch/tls" (and (eq .name "gateway") (ne $v.tls.gatewaySecretName "")) }}
{{- $_ := set $env "HYBRIDSEARCH_TLS__CA_FILE" "/etc/hybridsearch/tls/ca.crt" }}
{{- $_ = set $env "HYBRIDSEARCH_TLS__CERT_FILE" (printf "%s/tls.crt" $own) }}
{{- $_ = set $env "HYBRIDSEARCH_TLS__KEY_FILE" (printf "%s/tls.key" $own) }}
{{- $_ = set $env "HYBRIDSEARCH_TLS__CLIENT_CERT_FILE" "/etc/hybridsearch/tls/tls.crt" }}
{{- $_ = set $env "HYBRIDSEARCH_TLS__CLIENT_KEY_FILE" "/etc/hybridsearch/tls/tls.key" }}
{{- $_ = set $env "HYBRIDSEARCH_TLS__GATEWAY_CLIENT_AUTH" (toString $v.tls.gatewayClientAuth) }}
{{- end }}
{{- if and $v.auth.enabled (eq .name "gateway") }}
{{- $_ := set $env "HYBRIDSEARCH_AUTH__KEYS_FILE" "/etc/hybridsearch/auth/keys.yaml" }}
{{- with $v.auth.oidc }}{{- if .issuer }}
{{- $_ = set $env "HYBRIDSEARCH_AUTH__OIDC__ISSUER" .issuer }}
{{- $_ = set $env "HYBRIDSEARCH_AUTH__OIDC__AUDIENCE" .audience }}
{{- if .jwksConfigMap }}
{{- $_ = set $env "HYBRIDSEARCH_AUTH__OIDC__JWKS_FILE" "/etc/hybridsearch/oidc/jwks.json" }}
{{- else }}
{{- $_ = set $env "HYBRIDSEARCH_AUTH__OIDC__JWKS_URL" .jwksUrl }}
{{- end }}
{{- $_ = set $env "HYBRIDSEARCH_AUTH__OIDC__USER_CLAIM" .userClaim }}
{{- $_ = set $env "HYBRIDSEARCH_AUTH__OIDC__GROUPS_CLAIM" .groupsClaim }}
{{- $_ = set $env "HYBRIDSEARCH_AUTH__OIDC__READ" (toJson .read) }}
{{- end }}{{- end }}
{{- end }}
{{- if include "hybridsearch.readsSealingKeys" . }}
{{- $_ := set $env "HYBRIDSEARCH_SEALING__KEYS_FILE" "/etc/hybridsearch/sealing/keys.yaml" }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/* volumeMounts entries. Args: root, name. */}}
{{- define "hybridsearch.accessMounts" -}}
{{- $v := .root.Values }}
{{- if $v.tls.enabled }}
- name: tls
  mountPath: /etc/hybridsearch/tls
  readOnly: true
{{- if and (eq .name "gateway") $v.tls.gatewaySecretName }}
- name: gateway-tls
  mountPath: /etc/hybridsearch/gateway-tls
  readOnly: true
{{- end }}
{{- end }}
{{- if and $v.auth.enabled (eq .name "gateway") }}
- name: api-keys
  mountPath: /etc/hybridsearch/auth
  readOnly: true
{{- if and $v.auth.oidc.issuer $v.auth.oidc.jwksConfigMap }}
- name: oidc-jwks
  mountPath: /etc/hybridsearch/oidc
  readOnly: true
{{- end }}
{{- end }}
{{- if include "hybridsearch.readsSealingKeys" . }}
- name: sealing-keys
  mountPath: /etc/hybridsearch/sealing
  readOnly: true
{{- end }}
{{- end }}

{{/* volumes entries. Args: root, name. */}}
{{- define "hybridsearch.accessVolumes" -}}
{{- $v := .root.Values }}
{{- if $v.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "hybridsearch.tlsSecretName" .root }}
    defaultMode: 0440
{{- if and (eq .name "gateway") $v.tls.gatewaySecretName }}
- name: gateway-tls
  secret:
    secretName: {{ $v.tls.gatewaySecretName }}
    defaultMode: 0440
{{- end }}
{{- end }}
{{- if and $v.auth.enabled (eq .name "gateway") }}
- name: api-keys
  secret:
    secretName: {{ include "hybridsearch.apiKeysSecretName" .root }}
    defaultMode: 0440
    items:
      - key: {{ $v.auth.key }}
        path: keys.yaml
{{- if and $v.auth.oidc.issuer $v.auth.oidc.jwksConfigMap }}
- name: oidc-jwks
  configMap:
    name: {{ $v.auth.oidc.jwksConfigMap }}
    items:
      - key: jwks.json
        path: jwks.json
{{- end }}
{{- end }}
{{- if include "hybridsearch.readsSealingKeys" . }}
- name: sealing-keys
  secret:
    secretName: {{ $v.sealing.keysSecret }}
    defaultMode: 0440
    items:
      - key: {{ $v.sealing.key }}
        path: keys.yaml
{{- end }}
{{- end }}

{{/* The Secret holding the key page tokens are signed with (every gateway replica the same): paging.existingSecret or the chart's. */}}
{{- define "hybridsearch.pagingSecretName" -}}
{{- .Values.paging.existingSecret | default (printf "%s-paging" (include "hybridsearch.fullname" .)) }}
{{- end }}
