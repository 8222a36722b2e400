//go:build !weir_nos3

package checkpoint

import _ "gocloud.dev/blob/s3blob" // s3://
