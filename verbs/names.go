package verbs

// nameOf returns the name names gives e, or unknown where e lies past the
// table or has no name in it: the String of the enumerations spelled by a
// table indexed by value.
func nameOf[E ~uint8](names []string, e E, unknown string) string {
	if int(e) < len(names) && names[e] != "" {
		return names[e]
	}
	return unknown
}
