package soft

// DirectLink is implemented by links whose peers may reach some regions
// without this device's engine (shared memory): it says which.
type DirectLink interface {
	DirectRemoteAccess(mr *MR) bool
}

// DirectRemoteAccess reports whether peers' one-sided operations on the
// region bypass this device's engine: only when the link says so, since a
// soft device's engine otherwise serves every peer access itself.
func (m *MR) DirectRemoteAccess() bool {
	if dl, ok := m.dev.link.(DirectLink); ok {
		return dl.DirectRemoteAccess(m)
	}
	return false
}
