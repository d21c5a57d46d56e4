// The HTTP API of a node: each route module registers its routes on the node's router. The
// modules keep a copy of `node` (borrowed parts) for as long as the router holds their handlers.
#pragma once

#include "api/node.h"
#include "http/router.h"

namespace sediment::api {

void AddIngestRoutes(http::Router& router, const Node& node);      // ingest_routes.cc
void AddQueryRoutes(http::Router& router, const Node& node);       // query_routes.cc, job_routes.cc
void AddStatusRoutes(http::Router& router, const Node& node);      // status_routes.cc
void AddStorageRoutes(http::Router& router, const Node& node);     // storage_routes.cc
void AddLookupRoutes(http::Router& router, const Node& node);      // lookup_routes.cc
void AddElasticRoutes(http::Router& router, const Node& node);     // elastic_routes.cc
void AddParserRoutes(http::Router& router, const Node& node);      // parser_routes.cc
void AddManagementRoutes(http::Router& router, const Node& node);  // management_routes.cc
void AddWebRoutes(http::Router& router, const Node& node);         // web_routes.cc
void AddMetricsRoutes(http::Router& router, const Node& node);     // metrics_routes.cc
void AddAlertRoutes(http::Router& router, const Node& node);       // alert_routes.cc

// Every module's routes. `router` must outlive its handlers' calls (GET / and GET /api/v1 list
// its routes).
inline void AddRoutes(http::Router& router, const Node& node) {
  AddIngestRoutes(router, node);
  AddQueryRoutes(router, node);
  AddStatusRoutes(router, node);
  AddStorageRoutes(router, node);
  AddLookupRoutes(router, node);
  AddElasticRoutes(router, node);
  AddParserRoutes(router, node);
  AddWebRoutes(router, node);
  AddMetricsRoutes(router, node);
  AddManagementRoutes(router, node);
  AddAlertRoutes(router, node);
}

}  // namespace sediment::api
