{{- define "overlay-guard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release name alone when it already contains the chart name (overlay-guard -> overlay-guard). */}}
{{- define "overlay-guard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "overlay-guard.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "overlay-guard.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name -}}
{{- end -}}

{{- define "overlay-guard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "overlay-guard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "overlay-guard.labels" -}}
{{ include "overlay-guard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "overlay-guard.tlsSecret" -}}
{{- printf "%s-tls" (include "overlay-guard.fullname" .) -}}
{{- end -}}

{{/* The names the API server (and a port-forward) may dial, as in `python -m certs`. */}}
{{- define "overlay-guard.dnsNames" -}}
{{- $svc := include "overlay-guard.fullname" . -}}
{{- $ns := include "overlay-guard.namespace" . -}}
{{- $names := list (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) "localhost" -}}
{{- toJson (concat $names .Values.certificates.selfSigned.extraDNSNames) -}}
{{- end -}}

{{/*
The self-signed CA and serving certificate as a YAML map (caCrt, caKey, tlsCrt, tlsKey: PEM; caRenewAfter,
tlsRenewAfter: unix seconds; sans). Existing Secrets are reused (lookup), so an upgrade changes nothing
unless the serving certificate nears its expiry or its names changed; a new serving certificate comes
from the same CA, which keeps the caBundle valid while kubelets deliver the new Secret. `helm template`
cannot look up, so it renders fresh material every time.
*/}}
{{- define "overlay-guard.selfSignedTLS" -}}
{{- $cfg := .Values.certificates.selfSigned -}}
{{- $fullname := include "overlay-guard.fullname" . -}}
{{- $ns := include "overlay-guard.namespace" . -}}
{{- $dns := include "overlay-guard.dnsNames" . | fromJsonArray -}}
{{- $ips := concat (list "127.0.0.1") $cfg.extraIPAddresses -}}
{{- $sans := printf "%s;%s" (join "," $dns) (join "," $ips) -}}
{{- if ge (int $cfg.renewBeforeDays) (int $cfg.validityDays) -}}
{{- fail "certificates.selfSigned.renewBeforeDays must be less than validityDays" -}}
{{- end -}}
{{- $now := now | unixEpoch | atoi -}}
{{- $out := dict -}}
{{- $ca := lookup "v1" "Secret" $ns (printf "%s-ca" $fullname) -}}
{{- $caCrt := dig "data" "ca.crt" "" $ca | b64dec -}}
{{- $caKey := dig "data" "ca.key" "" $ca | b64dec -}}
{{- $caRenew := dig "metadata" "annotations" "overlay-guard.io/renew-after" "0" $ca | atoi -}}
{{- if and $caCrt $caKey (lt $now $caRenew) -}}
{{- $_ := set $out "caCrt" $caCrt -}}
{{- $_ := set $out "caKey" $caKey -}}
{{- $_ := set $out "caRenewAfter" (toString $caRenew) -}}
{{- else -}}
{{- $new := genCAWithKey (printf "%s-ca" $fullname) (int $cfg.caValidityDays) (genPrivateKey "ecdsa") -}}
{{- $_ := set $out "caCrt" $new.Cert -}}
{{- $_ := set $out "caKey" $new.Key -}}
{{- $days := sub $cfg.caValidityDays $cfg.renewBeforeDays -}}
{{- $_ := set $out "caRenewAfter" (toString (add $now (mul $days 86400))) -}}
{{- end -}}
{{- $tls := lookup "v1" "Secret" $ns (include "overlay-guard.tlsSecret" .) -}}
{{- $tlsCrt := dig "data" "tls.crt" "" $tls | b64dec -}}
{{- $tlsKey := dig "data" "tls.key" "" $tls | b64dec -}}
{{- $tlsRenew := dig "metadata" "annotations" "overlay-guard.io/renew-after" "0" $tls | atoi -}}
{{- $tlsSans := dig "metadata" "annotations" "overlay-guard.io/subject-alt-names" "" $tls -}}
{{- $sameCA := eq (dig "data" "ca.crt" "" $tls | b64dec) $out.caCrt -}}
{{- if and $tlsCrt $tlsKey $sameCA (lt $now $tlsRenew) (eq $tlsSans $sans) -}}
{{- $_ := set $out "tlsCrt" $tlsCrt -}}
{{- $_ := set $out "tlsKey" $tlsKey -}}
{{- $_ := set $out "tlsRenewAfter" (toString $tlsRenew) -}}
{{- else -}}
{{- $signer := buildCustomCert ($out.caCrt | b64enc) ($out.caKey | b64enc) -}}
{{- $cn := printf "%s.%s.svc" $fullname $ns -}}
{{- $new := genSignedCertWithKey $cn $ips $dns (int $cfg.validityDays) $signer (genPrivateKey "ecdsa") -}}
{{- $_ := set $out "tlsCrt" $new.Cert -}}
{{- $_ := set $out "tlsKey" $new.Key -}}
{{- $days := sub $cfg.validityDays $cfg.renewBeforeDays -}}
{{- $_ := set $out "tlsRenewAfter" (toString (add $now (mul $days 86400))) -}}
{{- end -}}
{{- $_ := set $out "sans" $sans -}}
{{- toYaml $out -}}
{{- end -}}
