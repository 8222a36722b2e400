package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/weirproject/weir/kafkasec"
)

// This file reads kafka.tls and kafka.sasl (docs/pipelines.md, docs/kafka.md
// "Security") into KafkaSpec.Security. Secrets are taken only from
// environment variables (${VAR}) or files (passwordFile, tokenFile,
// clientSecretFile): a literal secret in the file is an error, and no
// error, log line or summary shows a secret's value.

// kafkaTLS reads kafka.tls: true (TLS with the system's roots), false
// (plaintext), or {caFile, certFile, keyFile, serverName,
// insecureSkipVerify}.
func (d *dec) kafkaTLS(k, n ast.Node, ks *KafkaSpec) {
	ks.TLSPos = d.pos(k)
	if b, ok := n.(*ast.BoolNode); ok {
		if b.Value {
			ks.Security.TLS = &kafkasec.TLS{}
		}
		return
	}
	t := &kafkasec.TLS{}
	if !d.object(n, "kafka.tls",
		field{name: "caFile", accepts: "a PEM file of the brokers' CA", def: "the system's roots", doc: "a PEM CA bundle that signs the brokers' certificates",
			fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a PEM file of the brokers' CA", &t.CAFile) }},
		field{name: "certFile", accepts: "a PEM client certificate (mutual TLS)", def: "none", doc: "with `keyFile`: a client certificate for mutual TLS",
			fn: func(at string, _, v ast.Node) {
				d.nonEmpty(v, at, "a PEM client certificate (mutual TLS)", &t.CertFile)
			}},
		field{name: "keyFile", accepts: "the PEM private key of certFile", def: "none", doc: "the client certificate's key",
			fn: func(at string, _, v ast.Node) {
				d.nonEmpty(v, at, "the PEM private key of certFile", &t.KeyFile)
			}},
		field{name: "serverName", accepts: "the host name in the brokers' certificates", def: "the broker's host", doc: "the name checked in the brokers' certificates",
			fn: func(at string, _, v ast.Node) {
				d.nonEmpty(v, at, "the host name in the brokers' certificates", &t.ServerName)
			}},
		field{name: "insecureSkipVerify", accepts: "true or false", def: "`false`", doc: "turn verification off (tests only; logged as a warning)",
			fn: func(at string, _, v ast.Node) { d.boolean(v, at, &t.InsecureSkipVerify) }},
	) {
		return
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		d.errf(k, "kafka.tls: certFile and keyFile go together (mutual TLS); give both or neither")
	}
	ks.Security.TLS = t
}

// kafkaSASL reads kafka.sasl: {mechanism, ...} with the keys of
// kafkasec.SASL in camel case.
func (d *dec) kafkaSASL(k, n ast.Node, ks *KafkaSpec) {
	ks.SASLPos = d.pos(k)
	a := &kafkasec.SASL{}
	str := func(key, example string, dst *string) field {
		return field{name: key, accepts: "a string", def: "none", doc: example, fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, example, dst) }}
	}
	secret := func(key, file string, dst *kafkasec.Secret) field {
		doc := "a secret, from the environment only"
		if file != "" {
			doc += " (or " + file + ")"
		}
		return field{name: key, accepts: "`${ENV}`", def: "none", doc: doc, fn: func(at string, _, v ast.Node) { d.secret(v, at, file, dst) }}
	}
	if !d.object(n, "kafka.sasl",
		field{name: "mechanism", required: true, accepts: "`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER`, `AWS_MSK_IAM`", doc: "the mechanism; a key it does not read is an error",
			fn: func(at string, _, v ast.Node) {
				d.oneOf(v, at, &a.Mechanism, kafkasec.Mechanisms...)
			}},
		str("username", "the user name (or API key)", &a.Username),
		secret("password", "passwordFile", &a.Password),
		str("passwordFile", "a file holding the password", &a.PasswordFile),
		secret("token", "tokenFile", &a.Token),
		str("tokenFile", "a file holding the OAuth bearer token", &a.TokenFile),
		str("tokenURL", "the OAuth token endpoint, such as https://login.example.com/oauth2/token", &a.TokenURL),
		str("clientID", "the OAuth client id", &a.ClientID),
		secret("clientSecret", "clientSecretFile", &a.ClientSecret),
		str("clientSecretFile", "a file holding the OAuth client secret", &a.ClientSecretFile),
		str("scope", "the OAuth scope", &a.Scope),
		field{name: "extensions", accepts: "NAME: value", def: "none", doc: "`OAUTHBEARER`: SASL extensions", fn: func(at string, _, v ast.Node) {
			kvs, _ := d.entries(v, at)
			for _, kv := range kvs {
				name, _, ok := d.keyOf(kv)
				if !ok {
					continue
				}
				var val string
				if d.str(d.unwrap(kv.Value), "kafka.sasl.extensions."+name, &val) {
					if a.Extensions == nil {
						a.Extensions = map[string]string{}
					}
					a.Extensions[name] = val
				}
			}
		}},
		str("accessKey", "the AWS access key id", &a.AccessKey),
		secret("secretKey", "", &a.SecretKey),
		secret("sessionToken", "", &a.SessionToken),
	) {
		return
	}
	ks.Security.SASL = a
}

// envRef is a value that is one environment variable reference and
// nothing else.
var envRef = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// secret reads a secret: only ${VAR}, never a literal (whose text is not
// repeated in the error).
func (d *dec) secret(n ast.Node, what, file string, dst *kafkasec.Secret) {
	raw, ok := scalarText(n)
	if _, isStr := n.(*ast.StringNode); !ok || !isStr {
		d.errf(n, "%s: got %s; want ${ENV_VAR}, an environment variable holding the secret", what, describe(n))
		return
	}
	if !envRef.MatchString(strings.TrimSpace(raw)) {
		alt := ""
		if file != "" {
			alt = " or kafka.sasl." + file + " (a file holding it)"
		}
		d.errf(n, "%s: a literal secret is refused (pipeline files get copied and committed); write ${ENV_VAR}, an environment variable holding it%s", what, alt)
		return
	}
	var v string
	if d.str(n, what, &v) { // expands; its errors name the variable only
		if v == "" {
			d.errf(n, "%s: %s is empty", what, strings.TrimSpace(raw))
			return
		}
		*dst = kafkasec.Secret(v)
	}
}

// resolveSecurityPaths makes the files of sec relative to the pipeline
// file's directory.
func resolveSecurityPaths(sec *kafkasec.Security, fix func(*string)) {
	if t := sec.TLS; t != nil {
		fix(&t.CAFile)
		fix(&t.CertFile)
		fix(&t.KeyFile)
	}
	if a := sec.SASL; a != nil {
		fix(&a.PasswordFile)
		fix(&a.TokenFile)
		fix(&a.ClientSecretFile)
	}
}

// securityError places a kafkasec error at the kafka.sasl or kafka.tls key
// it is about (the kafka key when neither fits).
func securityError(ks *KafkaSpec, err error) error {
	pos := ks.Pos
	switch msg := err.Error(); {
	case strings.Contains(msg, "sasl.") && ks.SASLPos.Line > 0:
		pos = ks.SASLPos
	case strings.Contains(msg, "tls.") && ks.TLSPos.Line > 0:
		pos = ks.TLSPos
	}
	return fmt.Errorf("%s: kafka: %w", pos, err)
}

// ParseSecurityFile reads a Kafka security file for the command line
// (`--kafka-config FILE`): a YAML mapping with the keys of a pipeline's
// kafka section that concern security, tls and sasl, under the same rules
// (secrets only from ${ENV} or files; paths relative to the file). The
// error is Errors, each at its file:line:column; the result is validated
// (kafkasec.Security.Validate), which reads the files it names.
func ParseSecurityFile(path string) (kafkasec.Security, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return kafkasec.Security{}, fmt.Errorf("pipeline: %w", err)
	}
	d := &dec{file: path}
	ks := &KafkaSpec{}
	if body := d.parseYAML(src); body != nil {
		ks.Pos = d.pos(body)
		d.object(body, "kafka config",
			field{name: "tls", fn: func(at string, k, v ast.Node) { d.kafkaTLS(k, v, ks) }},
			field{name: "sasl", fn: func(at string, k, v ast.Node) { d.kafkaSASL(k, v, ks) }},
		)
	}
	if len(d.errs) > 0 {
		return kafkasec.Security{}, d.errs
	}
	resolveSecurityPaths(&ks.Security, func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(filepath.Dir(path), *p)
		}
	})
	if err := ks.Security.Validate(); err != nil {
		return kafkasec.Security{}, securityError(ks, err)
	}
	return ks.Security, nil
}
