// Package azure makes checkpoint and savepoint locations
// azblob://CONTAINER/PREFIX work (Azure Blob Storage, through
// gocloud.dev/blob/azureblob): import it for its side effect. Credentials:
// AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or
// Azure's default credential chain. cmd/weir links it with -tags
// weir_azure (or weir_cloud).
package azure

import (
	_ "gocloud.dev/blob/azureblob" // azblob://

	"github.com/weirproject/weir/checkpoint/bucket"
)

func init() { bucket.Register("azblob") }
