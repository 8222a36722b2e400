// Package s3 makes checkpoint and savepoint locations s3://BUCKET/PREFIX
// work (Amazon S3 and S3-compatible stores, through gocloud.dev/blob/s3blob):
// import it for its side effect. Credentials are the AWS SDK's standard ones
// (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the shared
// config files, an instance role); the URL's query sets region, endpoint
// and use_path_style. cmd/weir links it with -tags weir_s3 (or weir_cloud).
package s3

import (
	_ "gocloud.dev/blob/s3blob" // s3://

	"github.com/weirproject/weir/checkpoint/bucket"
)

func init() { bucket.Register("s3") }
