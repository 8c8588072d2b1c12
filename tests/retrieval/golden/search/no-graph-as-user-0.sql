SELECT namespaces.id, namespaces.settings, memvault_has_other_model(namespaces.id, %(model_id)s::VARCHAR) AS memvault_has_other_model_1, tsvector_to_array(to_tsvector(%(to_tsvector_1)s::REGCONFIG, %(query)s::VARCHAR)) AS tsvector_to_array_1, NULL AS anon_1 
FROM namespaces 
WHERE namespaces.tenant_id = %(tenant_id)s::UUID AND namespaces.name = %(namespace)s::VARCHAR
