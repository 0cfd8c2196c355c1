package server

// ClientID is the id of the connection whose client address is remote, or 0.
func (s *Server) ClientID(remote string) int64 {
	for _, c := range s.clientList() {
		if c.adm.raddr == remote {
			return c.id
		}
	}
	return 0
}
