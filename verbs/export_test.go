package verbs

// PendingRequests is how many requests d keeps to reject at Close.
func PendingRequests(d *Device) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.cm.pending)
}
