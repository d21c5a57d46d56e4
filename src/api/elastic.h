// Elasticsearch-compatible answers (elastic_routes.cc): what Elastic clients and shippers (the
// elasticsearch clients, Beats, Logstash, Fluent Bit, syslog-ng's elasticsearch-http()) read.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "api/node.h"
#include "http/http_server.h"
#include "ingest/ingest.h"

namespace sediment::api {

// Sets what every Elastic route answers with: the X-Elastic-Product header, and the content type
// the request's Accept asks for ("application/vnd.elasticsearch+json;compatible-with=N" when it
// names a compatible-with version, else application/json).
void ElasticHeaders(const http::Request& req, http::Response* r);

// The bulk answer, {"took", "errors", "items": [{ACTION: {_index, _id, status, result | error}}]},
// one item per action in body order (ingest::BulkItem).
http::Response ElasticBulkAnswer(const http::Request& req,
                                 const std::vector<ingest::BulkItem>& items, int64_t took_ms);

// GET /: Elastic's info document {name, cluster_name, cluster_uuid, version: {number, ...},
// tagline} when the request looks like an Elastic client's (Basic or ApiKey credentials, an
// Accept naming application/vnd.elasticsearch, an X-Elastic-Client-Meta header, or a User-Agent
// naming elastic, beat, logstash or fluent-bit); 401 in Elastic's shape when it carries
// credentials that are no ingest token. nullopt for any other request (the route index answers).
std::optional<http::Response> ElasticRootAnswer(const http::Request& req, const Node& node);

}  // namespace sediment::api
