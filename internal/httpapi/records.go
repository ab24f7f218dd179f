package httpapi

// recordRoutes are the routes of records, buckets and blobs.
func (s *Server) recordRoutes() []route {
	return nil
}
