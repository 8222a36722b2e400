// Package embed turns texts into vectors for retrieval and long-term
// memory: the Model interface, a client of OpenAI-compatible embeddings
// endpoints on the official SDK (OpenAI), and an offline model (Offline)
// that hashes words into a fixed number of dimensions, deterministic and
// without a server, for tests, examples and benchmarks.
//
// # Guarantees
//
//	I1. One interface. Model.Embed takes texts and returns one vector per
//	    text, in the order given, all of the model's dimension; it is safe
//	    for concurrent use (the agent operator calls it from many actions).
//	I2. Wire format. OpenAIClient sends POST {base}/embeddings with the
//	    model, the inputs as an array of strings and encoding_format
//	    "float" (and dimensions when set), as the OpenAI API defines it, and
//	    puts the returned vectors back in input order by their index; a
//	    reply with a missing, repeated or out-of-range index, or vectors of
//	    unequal lengths, is an error that says so. Inputs beyond
//	    OpenAIConfig.BatchSize are sent in several requests.
//	I3. Errors and retries as in package model (model I4): a server's
//	    error is a *model.APIError; 429, 408, 409, 5xx and network errors
//	    are retried by the config's model.RetryPolicy, the server's wait
//	    honoured as package model reads it (retry-after-ms, else
//	    Retry-After in seconds or as an HTTP-date), others are not. The
//	    API key appears in no String, log or error.
//	I4. Determinism. Offline's vector of a text depends only on the text,
//	    Dimensions and Seed: lower-cased words (runs of letters and digits)
//	    of two letters or more, outside a short list of English function
//	    words, each add ±1 to the dimension their FNV-1a hash picks; the
//	    vector is then scaled to unit length (a text without such words
//	    gives the zero vector). Texts sharing words have a positive cosine.
package embed
