package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/tools"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// builtInSpec is what the model is told about a built-in tool: when to use it, its input
// fields and the limits the tools package enforces. The input schemas follow the input shapes
// of API.md §3.2; every number in a description comes from the constant the code enforces
// (package tools), so the model reads the limits that apply. The web tools run on the worker
// (package tools/web, which agent may not import); their defaults are written out here and a
// test holds them to that package's constants. docs/harness-prompt.md explains them.
type builtInSpec struct {
	description string
	schema      json.RawMessage
}

// Defaults of the web tools (tools/web: DefaultFetchTimeout, DefaultMaxBodyBytes,
// DefaultMaxRedirects, DefaultMaxContentTokens, maxURLLen, DefaultSearchTimeout,
// DefaultMaxResults, maxQueryChars). A deployment may change the timeouts and the body cap.
const (
	webFetchTimeout          = 30 * time.Second
	webFetchMaxBodyBytes     = 10 << 20
	webFetchMaxRedirects     = 5
	webFetchMaxContentTokens = 25_000
	webFetchMaxURLChars      = 4096
	webSearchTimeout         = 15 * time.Second
	webSearchMaxResults      = 10
	webSearchMaxQueryChars   = 1000
)

// pathRule is how every file tool resolves paths.
const pathRule = "Paths are relative to the workspace root (absolute paths inside the workspace work too); `..` out of it, absolute paths elsewhere and symbolic links that lead out of it are refused."

// cutRule is what happens to a long result of any sandbox tool.
var cutRule = fmt.Sprintf("A result longer than %s characters is cut, and its full text saved to a file under %s that the result names (read it in parts with read's view_range, or search it with grep).",
	thousands(tools.MaxResultChars), tools.SpillDir)

var builtInSpecs = map[string]builtInSpec{
	wire.ToolNameBash: {
		description: lines(
			"Runs a bash command in the session's sandbox and returns its stdout and stderr, interleaved as written.",
			"",
			"- Each call runs in a new bash process that starts in the directory the previous call ended in (at first the workspace root): a `cd` carries over, but environment variables, shell variables, functions and aliases do not. Set them in the same command (`export X=1 && ...`), or keep them in a file and `source` it. Do not rely on background processes (`&`) outliving the call.",
			fmt.Sprintf("- Timeout: %s by default; timeout_ms sets another, up to %s (larger values are lowered to it). A command that times out is killed with every process it started, and the result is an error that shows the output written until then.",
				duration(tools.DefaultBashTimeout), duration(tools.MaxBashTimeout)),
			fmt.Sprintf("- Output: a non-zero exit status is appended as `[exit code N]`; only the first %s of output is kept (the result says when more was written); NUL bytes and invalid UTF-8 are shown as U+FFFD. %s",
				size(tools.BashMaxOutput), cutRule),
			"- Commands run without a terminal and without input: pass flags such as `-y` and `--no-pager`, and avoid interactive programs (editors, pagers, prompts).",
			"- Prefer the dedicated tools when they fit: read instead of cat, head or tail; edit and write instead of sed, awk or echo redirection; glob instead of find or ls; grep instead of grep or rg. Use bash for everything else: builds, tests, git, package managers, running programs.",
			"- restart: true resets the working directory to the workspace root (before the command, if there is one).",
		),
		schema: objectSchemaOf(nil,
			prop("command", "string", "The command to run: one bash script, which may span lines and use pipes, `&&` and `;`. Quote paths that contain spaces. Required unless restart is true."),
			prop("restart", "boolean", "Reset the working directory to the workspace root, then run command if one is given."),
			propWith("timeout_ms", "integer", fmt.Sprintf("Kill the command after this many milliseconds (default %d; at most %d, larger values are lowered to it).",
				tools.DefaultBashTimeout.Milliseconds(), tools.MaxBashTimeout.Milliseconds()), map[string]any{"minimum": 0}),
		),
	},
	wire.ToolNameRead: {
		description: lines(
			"Reads a file from the workspace.",
			"",
			"- A text file comes back with line numbers, like `cat -n`: each line is its number right-aligned in 6 columns, a tab, then the line's text. The number and the tab are not part of the file: leave them out of edit's old_string.",
			"- view_range [start, end] returns only those lines (1-indexed and inclusive; an end of -1 or 0 reads to the end of the file). Use it on long files. "+cutRule,
			fmt.Sprintf("- PNG, JPEG, GIF and WebP images come back as an image you can see, and PDF documents as a document you can read (text and pages); the file's content decides, not its name. Images may have at most %s (%s once base64-encoded) and %d×%d pixels, PDFs at most %s and %d pages; a larger file is an error that says how to shrink it. Each image or PDF you read stays in the conversation and is sent with every later request, which may hold at most 100 images, each at most 2000×2000 pixels once there are more than 20: read only those you need, and make large images smaller first.",
				size(tools.MaxImageBytes), size(tools.MaxImageBase64Bytes), tools.MaxImageSide, tools.MaxImageSide, size(tools.MaxPDFBytes), tools.MaxPDFPages),
			"- Other binary files are refused: inspect them with bash (`file`, `xxd`).",
			"- "+pathRule+" Files outside the workspace are reached with bash.",
			"- Prefer read over cat, head or tail in bash, and read a file before you edit or overwrite it.",
		),
		schema: objectSchemaOf([]string{"file_path"},
			prop("file_path", "string", "The file to read, relative to the workspace root."),
			propWith("view_range", "array", "Optional [start, end]: the lines to return, 1-indexed and inclusive; end -1 or 0 means the end of the file. Text files only; omit it to read the whole file.",
				map[string]any{"items": map[string]any{"type": "integer"}, "minItems": 2, "maxItems": 2}),
		),
	},
	wire.ToolNameWrite: {
		description: lines(
			"Creates a file with the given content, or replaces the whole content of an existing one; missing parent directories are created.",
			"",
			"- It overwrites without asking. To change part of an existing file use edit; before replacing a file, read it, so you know what you are replacing.",
			"- content is written exactly as given: no line numbers, and a final newline only if you include it.",
			"- "+pathRule,
			"- Prefer write over `cat <<EOF >` or `echo >` in bash.",
		),
		schema: objectSchemaOf([]string{"file_path", "content"},
			prop("file_path", "string", "The file to create or replace, relative to the workspace root."),
			prop("content", "string", "The file's complete new content."),
		),
	},
	wire.ToolNameEdit: {
		description: lines(
			"Replaces exact text in a file: old_string becomes new_string.",
			"",
			"- old_string must match the file exactly, whitespace and indentation included, and occur exactly once, unless replace_all is true, which replaces every occurrence. When it occurs more than once, add surrounding lines until it is unique. When nothing matches, or the match is not unique, the edit fails and the file is unchanged.",
			"- Read the file first (edit does not show it), and copy old_string from read's output without the line-number prefix (the number and the tab).",
			"- old_string must not be empty, and new_string must differ from it. To delete text, make new_string empty; to create a file, use write.",
			"- "+pathRule,
			"- Prefer edit over sed in bash, and over rewriting a whole file with write: it changes only what you name, and fails instead of guessing.",
		),
		schema: objectSchemaOf([]string{"file_path", "old_string", "new_string"},
			prop("file_path", "string", "The file to edit, relative to the workspace root."),
			prop("old_string", "string", "The exact text to replace: unique in the file unless replace_all is true."),
			prop("new_string", "string", "The text to put in its place (empty to delete old_string)."),
			prop("replace_all", "boolean", "Replace every occurrence of old_string instead of requiring exactly one (default false)."),
		),
	},
	wire.ToolNameGlob: {
		description: lines(
			"Lists the files whose path matches a glob pattern, sorted by path.",
			"",
			"- The pattern (doublestar syntax) is matched against each file's path relative to path (default the workspace root): `*` matches within one path segment, `**` any number of segments, `?` one character, `[abc]` one of a set, `{a,b}` either alternative. `**/*.go` finds Go files at any depth; `*.go` only those directly in path.",
			fmt.Sprintf("- Only files are listed, not directories; .git and %s are skipped. Paths come back relative to the workspace root, ready for read.", tools.StateDir),
			fmt.Sprintf("- At most %s paths are shown (the result says how many matched); listing the files may take at most %s; in a very large tree some files may not be considered, and the result says so: narrow path.",
				thousands(tools.GlobMaxResults), duration(tools.ListTimeout)),
			"- Prefer glob over find or ls in bash; use grep to search inside files.",
		),
		schema: objectSchemaOf([]string{"pattern"},
			prop("pattern", "string", "The glob pattern, relative to path, for example `**/*.ts` or `src/**/test_*.py`."),
			prop("path", "string", "The directory to search, relative to the workspace root (default: the workspace root)."),
		),
	},
	wire.ToolNameGrep: {
		description: lines(
			"Searches the contents of files for a regular expression and prints each matching line as `path:line:text`.",
			"",
			"- The pattern is Go RE2 syntax (like ripgrep's; no backreferences or lookaround), matched against each line on its own; `(?i)` makes it case-insensitive. Escape metacharacters to find literal text, for example `func main\\(`.",
			fmt.Sprintf("- path is a directory, searched recursively (default the workspace root), or one file. .git and %s are skipped, as are binary files and files larger than %s. There is no file-type filter: narrow with path, or find files with glob first.",
				tools.StateDir, size(tools.GrepMaxFileSize)),
			fmt.Sprintf("- At most %s matching lines are shown (the result says how many there were), each cut at %s characters; at most %s files are searched, and listing them may take at most %s.",
				thousands(tools.GrepMaxMatches), thousands(tools.GrepMaxLineChars), thousands(tools.GrepMaxFiles), duration(tools.ListTimeout)),
			"- Prefer grep over grep or rg in bash.",
		),
		schema: objectSchemaOf([]string{"pattern"},
			prop("pattern", "string", "The regular expression to search for (Go RE2 syntax), matched line by line."),
			prop("path", "string", "The file or directory to search, relative to the workspace root (default: the workspace root)."),
		),
	},
	wire.ToolNameWebFetch: {
		description: lines(
			"Fetches a web page and returns its text as a document: HTML converted to Markdown, plain text and JSON as they are. It runs on the server, not in the sandbox, so the environment's network policy does not apply to it; the agent's allowed_domains and blocked_domains do.",
			"",
			fmt.Sprintf("- Only http and https URLs of at most %s characters. Redirects are followed (by default at most %d) and checked like the first URL; addresses of private and local networks are refused unless the deployment allows them.", thousands(webFetchMaxURLChars), webFetchMaxRedirects),
			fmt.Sprintf("- The text is cut at the agent's max_content_tokens (by default %s tokens, about %s characters); by default at most %s of the response is read and a fetch takes at most %s. Other content types (PDF, images, archives) are refused.",
				thousands(webFetchMaxContentTokens), thousands(webFetchMaxContentTokens*4), size(webFetchMaxBodyBytes), duration(webFetchTimeout)),
			"- An error names its kind: invalid_input, url_too_long, url_not_allowed, url_not_accessible or unsupported_content_type.",
			"- Use web_search to find pages to fetch.",
		),
		schema: objectSchemaOf([]string{"url"},
			prop("url", "string", fmt.Sprintf("The absolute http or https URL to fetch (at most %s characters).", thousands(webFetchMaxURLChars))),
		),
	},
	wire.ToolNameWebSearch: {
		description: lines(
			fmt.Sprintf("Searches the web and returns up to %d results, each with its URL, title and a snippet. It runs on the server, not in the sandbox; the agent's allowed_domains and blocked_domains filter the results.", webSearchMaxResults),
			"",
			fmt.Sprintf("- The query may have at most %s characters; a search takes at most %s by default.", thousands(webSearchMaxQueryChars), duration(webSearchTimeout)),
			"- A server without a search backend answers with the error unavailable.",
			"- Read a result in full with web_fetch.",
		),
		schema: objectSchemaOf([]string{"query"},
			prop("query", "string", fmt.Sprintf("What to search for (at most %s characters).", thousands(webSearchMaxQueryChars))),
		),
	},
}

// maxDescribedDomains bounds the domains a web tool's description lists.
const maxDescribedDomains = 50

// describeBuiltIn is the description of an enabled built-in as this agent has it: the spec's,
// plus, for the web tools, what the agent's configs[] entry sets (its domains, web_fetch's
// content budget), so the model does not spend calls on URLs the tool will refuse. An agent's
// configuration is fixed for its session, so the text is too.
func describeBuiltIn(name string, cfg wire.ToolConfig) string {
	desc := builtInSpecs[name].description
	if !tools.IsWebTool(name) {
		return desc
	}
	var set []string
	switch {
	case cfg.AllowedDomains == nil:
	case len(cfg.AllowedDomains) == 0:
		set = append(set, "allowed_domains is empty, so every URL is refused")
	default:
		set = append(set, "only these domains (and their subdomains) are allowed: "+domainList(cfg.AllowedDomains))
	}
	if len(cfg.BlockedDomains) > 0 {
		set = append(set, "these domains are blocked: "+domainList(cfg.BlockedDomains))
	}
	if name == wire.ToolNameWebFetch && cfg.MaxContentTokens != nil && *cfg.MaxContentTokens > 0 {
		set = append(set, fmt.Sprintf("max_content_tokens is %s", thousands(int(*cfg.MaxContentTokens))))
	}
	if len(set) == 0 {
		return desc
	}
	return desc + "\n- This agent's settings: " + strings.Join(set, "; ") + "."
}

func domainList(domains []string) string {
	if len(domains) <= maxDescribedDomains {
		return strings.Join(domains, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(domains[:maxDescribedDomains], ", "), len(domains)-maxDescribedDomains)
}

// lines joins a description's lines.
func lines(ls ...string) string { return strings.Join(ls, "\n") }

// schemaProp is one property of an input schema.
type schemaProp struct {
	name string
	def  map[string]any
}

func prop(name, typ, description string) schemaProp {
	return propWith(name, typ, description, nil)
}

func propWith(name, typ, description string, extra map[string]any) schemaProp {
	def := map[string]any{"type": typ, "description": description}
	for k, v := range extra {
		def[k] = v
	}
	return schemaProp{name: name, def: def}
}

// objectSchemaOf is the input schema of a built-in: an object of the given properties, no
// others (the tools decode their input strictly and refuse unknown fields). encoding/json
// sorts map keys, so the schema's bytes are the same in every request, as prompt caching
// needs.
func objectSchemaOf(required []string, props ...schemaProp) json.RawMessage {
	properties := map[string]any{}
	for _, p := range props {
		properties[p.name] = p.def
	}
	schema := map[string]any{"type": "object", "properties": properties, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	// Without HTML escaping, so `&&` reads as itself.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(schema); err != nil {
		panic(fmt.Sprintf("built-in tool schema: %v", err)) // static data: a programming error
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// thousands writes n with comma separators: 100,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// size writes a byte count in the largest binary unit that divides it evenly enough to read:
// 1 MiB, 2,047 KiB, 3.75 MiB.
func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%s MiB", thousands(n>>20))
	case n >= 1<<20 && (n*100)%(1<<20) == 0:
		return fmt.Sprintf("%s MiB", strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", float64(n)/(1<<20)), "0"), "."))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%s KiB", thousands(n>>10))
	}
	return fmt.Sprintf("%s bytes", thousands(n))
}

// duration writes a limit in whole minutes or seconds: 2 minutes, 60 seconds.
func duration(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0 && d > time.Minute:
		return fmt.Sprintf("%d minutes", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%d seconds", d/time.Second)
	}
	return d.String()
}
