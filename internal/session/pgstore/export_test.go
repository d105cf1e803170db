package pgstore

// SQLPath and KeyDigest let tests EXPLAIN the Path query.
const SQLPath = sqlPath

var KeyDigest = keyDigest
