SELECT namespaces.id, namespaces.settings, memvault_has_other_model(namespaces.id, %(model_id)s::VARCHAR) AS memvault_has_other_model_1, tsvector_to_array(to_tsvector(%(to_tsvector_1)s::REGCONFIG, %(query)s::VARCHAR)) AS tsvector_to_array_1, (SELECT json_agg(json_build_array(named.id, named.name, named.other)) AS json_agg_1 
FROM (SELECT said.id AS id, said.name AS name, CAST(%(param_1)s AS UUID) AS other 
FROM (SELECT entities.id AS id, entities.name AS name 
FROM entities 
WHERE entities.tenant_id = %(tenant_id)s::UUID AND entities.namespace_id = namespaces.id AND (btrim(regexp_replace(lower(entities.name), %(regexp_replace_1)s::VARCHAR, %(regexp_replace_2)s::VARCHAR, %(regexp_replace_3)s::VARCHAR)) = ANY (%(grams)s::TEXT[]) OR (EXISTS (SELECT %(param_2)s::INTEGER AS anon_2 
FROM unnest(entities.aliases) AS alias 
WHERE btrim(regexp_replace(lower(alias), %(regexp_replace_4)s::VARCHAR, %(regexp_replace_5)s::VARCHAR, %(regexp_replace_6)s::VARCHAR)) = ANY (%(grams)s::TEXT[]))))) AS said UNION ALL SELECT relations.source_id AS source_id, CAST(%(param_3)s AS TEXT) AS anon_3, relations.target_id AS target_id 
FROM relations 
WHERE relations.tenant_id = %(tenant_id)s::UUID AND relations.namespace_id = namespaces.id AND (relations.source_id IN (SELECT said.id 
FROM (SELECT entities.id AS id, entities.name AS name 
FROM entities 
WHERE entities.tenant_id = %(tenant_id)s::UUID AND entities.namespace_id = namespaces.id AND (btrim(regexp_replace(lower(entities.name), %(regexp_replace_1)s::VARCHAR, %(regexp_replace_2)s::VARCHAR, %(regexp_replace_3)s::VARCHAR)) = ANY (%(grams)s::TEXT[]) OR (EXISTS (SELECT %(param_2)s::INTEGER AS anon_2 
FROM unnest(entities.aliases) AS alias 
WHERE btrim(regexp_replace(lower(alias), %(regexp_replace_4)s::VARCHAR, %(regexp_replace_5)s::VARCHAR, %(regexp_replace_6)s::VARCHAR)) = ANY (%(grams)s::TEXT[]))))) AS said) OR relations.target_id IN (SELECT said.id 
FROM (SELECT entities.id AS id, entities.name AS name 
FROM entities 
WHERE entities.tenant_id = %(tenant_id)s::UUID AND entities.namespace_id = namespaces.id AND (btrim(regexp_replace(lower(entities.name), %(regexp_replace_1)s::VARCHAR, %(regexp_replace_2)s::VARCHAR, %(regexp_replace_3)s::VARCHAR)) = ANY (%(grams)s::TEXT[]) OR (EXISTS (SELECT %(param_2)s::INTEGER AS anon_2 
FROM unnest(entities.aliases) AS alias 
WHERE btrim(regexp_replace(lower(alias), %(regexp_replace_4)s::VARCHAR, %(regexp_replace_5)s::VARCHAR, %(regexp_replace_6)s::VARCHAR)) = ANY (%(grams)s::TEXT[]))))) AS said)) AND (relations.valid_from IS NULL OR relations.valid_from <= %(at)s::TIMESTAMP WITH TIME ZONE) AND (relations.valid_to IS NULL OR relations.valid_to > %(at)s::TIMESTAMP WITH TIME ZONE)) AS named) AS anon_1 
FROM namespaces 
WHERE namespaces.tenant_id = %(tenant_id)s::UUID AND namespaces.name = %(namespace)s::VARCHAR
