package sessions

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Limits of API.md §1.4 and §3.1 (the SDK's numbers, §15 row 12).
const (
	maxMetadataPairs    = 16
	maxMetadataKey      = 64
	maxMetadataValue    = 512
	maxNameLen          = 256
	maxDescriptionLen   = 2048
	maxSystemLen        = 100_000
	maxSkills           = 20
	maxModelIDLen       = 256
	maxTitleLen         = 512
	maxInitialEvents    = 50
	maxEventsPerRequest = 1000
	// Package lists are installed into every sandbox of the environment: 100 specs per manager
	// and 512 characters per spec (room for a version constraint or a VCS URL) are generous
	// for a setup step, and keep an environment a few hundred KB at most.
	maxPackagesPerManager = 100
	maxPackageSpecLen     = 512
	// maxQuoted bounds an input quoted in an error message.
	maxQuoted = 64
)

func checkLen(field, v string, lo, hi int) error {
	n := utf8.RuneCountInString(v)
	if n < lo {
		if lo == 1 {
			return invalidf("%s: must not be empty", field)
		}
		return invalidf("%s: must be at least %d characters", field, lo)
	}
	if n > hi {
		return invalidf("%s: must be at most %d characters", field, hi)
	}
	return nil
}

func validateMetadata(field string, m map[string]string) error {
	if len(m) > maxMetadataPairs {
		return invalidf("%s: at most %d pairs are allowed", field, maxMetadataPairs).withCode("invalid_metadata")
	}
	for k, v := range m {
		if k == "" || utf8.RuneCountInString(k) > maxMetadataKey {
			return invalidf("%s: key %q must be 1 to %d characters", field, wire.Excerpt(k, maxQuoted), maxMetadataKey).withCode("invalid_metadata")
		}
		if utf8.RuneCountInString(v) > maxMetadataValue {
			return invalidf("%s.%s: value must be at most %d characters", field, wire.Excerpt(k, maxQuoted), maxMetadataValue).withCode("invalid_metadata")
		}
	}
	return nil
}

// PatchMetadata is patchMetadata for the services beside this one (the work queue's items).
func PatchMetadata(field string, base map[string]string, patch wire.MetadataPatch, deleteEmpty bool) (map[string]string, error) {
	return patchMetadata(field, base, patch, deleteEmpty)
}

// patchMetadata applies a patch: a value upserts, null deletes; deleteEmpty also treats ""
// as delete (environments do).
func patchMetadata(field string, base map[string]string, patch wire.MetadataPatch, deleteEmpty bool) (map[string]string, error) {
	out := make(map[string]string, len(base)+len(patch))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil || (deleteEmpty && *v == "") {
			delete(out, k)
			continue
		}
		out[k] = *v
	}
	if err := validateMetadata(field, out); err != nil {
		return nil, err
	}
	return out, nil
}

var efforts = map[string]bool{"low": true, "medium": true, "high": true, "xhigh": true, "max": true}

// resolveModel validates a model param and returns its echo form.
func resolveModel(field string, p wire.ModelParam) (wire.Model, error) {
	if err := checkLen(field+".id", p.ID, 1, maxModelIDLen); err != nil {
		return wire.Model{}, err
	}
	m := wire.Model{ID: p.ID, Speed: "standard", InferenceGeo: p.InferenceGeo}
	if p.Effort != nil {
		if !efforts[p.Effort.Type] {
			return wire.Model{}, invalidf("%s.effort: must be one of low, medium, high, xhigh, max", field)
		}
		m.Effort = &wire.Effort{Type: p.Effort.Type}
	}
	switch p.Speed {
	case "", "standard":
	case "fast":
		m.Speed = "fast"
	default:
		return wire.Model{}, invalidf("%s.speed: must be standard or fast", field)
	}
	if p.InferenceGeo != nil && *p.InferenceGeo == "" {
		return wire.Model{}, invalidf("%s.inference_geo: must not be empty", field)
	}
	return m, nil
}

func resolveSkills(field string, in []wire.SkillParam) ([]wire.Skill, error) {
	if len(in) > maxSkills {
		return nil, invalidf("%s: at most %d skills are allowed", field, maxSkills)
	}
	out := make([]wire.Skill, 0, len(in))
	seen := map[string]bool{}
	for i, s := range in {
		f := fmt.Sprintf("%s[%d]", field, i)
		if s.Type != "anthropic" && s.Type != "custom" {
			return nil, invalidf("%s.type: must be anthropic or custom", f)
		}
		if err := checkLen(f+".skill_id", s.SkillID, 1, 256); err != nil {
			return nil, err
		}
		if seen[s.SkillID] {
			return nil, invalidf("%s.skill_id: %q is listed twice", f, wire.Excerpt(s.SkillID, maxQuoted))
		}
		seen[s.SkillID] = true
		// Without a skill registry the newest version is named, not resolved to a number.
		version := "latest"
		if s.Version != nil {
			if *s.Version == "" {
				return nil, invalidf("%s.version: must not be empty", f)
			}
			version = *s.Version
		}
		out = append(out, wire.Skill{Type: s.Type, SkillID: s.SkillID, Version: version})
	}
	return out, nil
}

var roleARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$`)

func resolveExecutionIdentity(p *wire.ExecutionIdentity) (wire.ExecutionIdentity, error) {
	if p == nil {
		return wire.ExecutionIdentity{Type: "service_account"}, nil
	}
	switch p.Type {
	case "service_account":
		if p.RoleARN != "" {
			return wire.ExecutionIdentity{}, invalidf("execution_identity.role_arn: only allowed with type aws_role")
		}
		return wire.ExecutionIdentity{Type: "service_account"}, nil
	case "aws_role":
		if !roleARN.MatchString(p.RoleARN) {
			return wire.ExecutionIdentity{}, invalidf("execution_identity.role_arn: must be an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
		}
		return *p, nil
	}
	return wire.ExecutionIdentity{}, invalidf("execution_identity.type: must be service_account or aws_role")
}

func isJSONNull(b []byte) bool {
	return len(b) == 0 || strings.TrimSpace(string(b)) == "null"
}
