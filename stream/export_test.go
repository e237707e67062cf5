package stream

// IsClosed reports whether c is closed, for the external tests.
var IsClosed = isClosed
