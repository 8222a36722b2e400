// Package gcs makes checkpoint and savepoint locations gs://BUCKET/PREFIX
// work (Google Cloud Storage, through gocloud.dev/blob/gcsblob): import it
// for its side effect. Credentials are Google's application default
// credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's login, the metadata
// server). cmd/weir links it with -tags weir_gcs (or weir_cloud).
package gcs

import (
	_ "gocloud.dev/blob/gcsblob" // gs://

	"github.com/weirproject/weir/checkpoint/bucket"
)

func init() { bucket.Register("gs") }
