//go:build !weir_nogcs

package checkpoint

import _ "gocloud.dev/blob/gcsblob" // gs://
