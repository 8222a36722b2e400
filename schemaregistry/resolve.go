package schemaregistry

import "slices"

// parseLocked resolves refs against the state and parses the schema.
func (s *Server) parseLocked(schemaType, text string, refs []Reference) (*parsed, *Error) {
	deps, e := s.resolveLocked(refs, 0)
	if e != nil {
		return nil, e
	}
	return parseSchema(schemaType, text, deps)
}

// resolveLocked returns the referenced schemas, each after its own
// references, each name once.
func (s *Server) resolveLocked(refs []Reference, depth int) ([]resolved, *Error) {
	if depth > 32 {
		return nil, apiErr(CodeInvalidSchema, "Invalid schema: references nested more than 32 deep (a cycle?)")
	}
	var out []resolved
	for _, ref := range refs {
		sub := s.mu.st.subjects[ref.Subject]
		n := ref.Version
		if n == 0 {
			n = -1
		}
		var v ver
		ok := sub != nil
		if ok {
			v, ok = sub.find(n, false)
		}
		if !ok {
			return nil, apiErr(CodeInvalidSchema, "Invalid schema: reference %q: subject '%s' version %d not found", ref.Name, ref.Subject, ref.Version)
		}
		sc := s.mu.st.schemas[v.id]
		sub2, e := s.resolveLocked(sc.refs, depth+1)
		if e != nil {
			return nil, e
		}
		for _, d := range append(sub2, resolved{name: ref.Name, text: sc.schema}) {
			if !slices.ContainsFunc(out, func(o resolved) bool { return o.name == d.name }) {
				out = append(out, d)
			}
		}
	}
	return out, nil
}

// liveParsedLocked parses the subject's live versions, oldest first.
func (s *Server) liveParsedLocked(sub *subj) ([]*parsed, *Error) {
	var out []*parsed
	for _, v := range sub.versions {
		if v.deleted {
			continue
		}
		p, e := s.parsedLocked(v.id)
		if e != nil {
			return nil, e
		}
		out = append(out, p)
	}
	return out, nil
}

// parsedLocked parses the stored schema id once and keeps it: a stored
// schema never changes, and its references name fixed versions.
func (s *Server) parsedLocked(id int) (*parsed, *Error) {
	s.cache.Lock()
	defer s.cache.Unlock()
	if p, ok := s.cache.parsed[id]; ok {
		return p, nil
	}
	sc := s.mu.st.schemas[id]
	p, e := s.parseLocked(sc.schemaType, sc.schema, sc.refs)
	if e != nil {
		return nil, apiErr(CodeStoreError, "Stored schema %d does not parse: %s", id, e.Message)
	}
	s.cache.parsed[id] = p
	return p, nil
}
