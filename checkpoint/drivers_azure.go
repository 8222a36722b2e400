//go:build !weir_noazure

package checkpoint

import _ "gocloud.dev/blob/azureblob" // azblob://
