// Package e2e holds the end-to-end suite: the official Anthropic Go SDK against the whole
// server (real PostgreSQL, real HTTP). It has no non-test code besides this comment.
package e2e
