package checkpoint

// The gocloud.dev/blob drivers of the bucket schemes (Schemes), one file
// each so that a build can leave one out with a tag (weir_nos3,
// weir_nogcs, weir_noazure): the drivers are most of weir's binary size
// (docs/checkpoints.md lists what each costs), and a location whose
// driver was left out is refused by name. Each driver reads its
// credentials the standard way of its cloud: s3 the AWS SDK's
// (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the shared
// config files, an instance role), gs Google's application default
// credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's login, the
// metadata server), azblob AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY,
// AZURE_STORAGE_SAS_TOKEN or Azure's default credential chain.
