package tools

import "time"

// Limits the built-ins enforce, exported for what tells the model about them (the agent's
// tool descriptions and harness preamble), so the numbers it reads are the numbers the code
// uses. Change a limit where it is defined; these follow.
const (
	// BashMaxOutput is how much of a command's output a bash result holds, in bytes.
	BashMaxOutput = bashMaxOutput
	// GlobMaxResults is how many paths a glob result lists.
	GlobMaxResults = maxGlobResults
	// GrepMaxMatches is how many matching lines a grep result lists.
	GrepMaxMatches = maxGrepMatches
	// GrepMaxFiles is how many files one grep searches.
	GrepMaxFiles = maxGrepFiles
	// GrepMaxFileSize is the largest file grep searches, in bytes.
	GrepMaxFileSize = maxGrepFileSize
	// GrepMaxLineChars is where grep cuts a long matching line, in characters.
	GrepMaxLineChars = maxGrepLineLen
	// ListTimeout bounds the listing of files glob and grep start from.
	ListTimeout time.Duration = listTimeout
	// SpillDir is where results cut at MaxResultChars keep their full text, relative to the
	// workspace root.
	SpillDir = outputsDir
)
